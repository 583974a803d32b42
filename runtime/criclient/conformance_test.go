package criclient_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/critest"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// serveFake serves a fresh fakecri on a unix socket in a temporary
// directory and returns a client dialled to it.
func serveFake(t testing.TB, cfg fakecri.Config) (*fakecri.Runtime, *criclient.Client) {
	t.Helper()
	return serveFakeOn(t, cfg, nil)
}

// serveFakeOn is serveFake with the server's listener wrapped by wrap
// when wrap is not nil.
func serveFakeOn(t testing.TB, cfg fakecri.Config, wrap func(net.Listener) net.Listener) (*fakecri.Runtime, *criclient.Client) {
	t.Helper()
	rt, err := fakecri.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "unix://" + filepath.Join(t.TempDir(), "fakecri.sock")
	lis, err := fakecri.ListenUnix(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		lis = wrap(lis)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fakecri.NewServer(rt, rt).Serve(ctx, lis) }()
	c, err := criclient.Dial(context.Background(), endpoint)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close(context.Background())
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return rt, c
}

func TestConformanceOverGRPC(t *testing.T) {
	_, c := serveFake(t, fakecri.Config{Images: []string{"busybox:1.36"}})
	critest.Run(t, critest.Config{Runtime: c, Images: c, Image: "busybox:1.36"})
}
