package cri_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// cri.Dial still dials: it is criclient.Dial under its old name.
func TestDialShorthand(t *testing.T) {
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := serveOnSocket(t, fake)
	ctx := context.Background()
	var c *criclient.Client
	c, err = cri.Dial(ctx, endpoint, criclient.WithTimeout(criclient.DefaultTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rt, err := cri.New(cri.Config{RuntimeService: c, ImageService: c, PodLogsDir: t.TempDir(), PodsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Status(ctx); err != nil || c.RuntimeName() != "fakecri" {
		t.Errorf("runtime %q, Status error %v: want fakecri answering", c.RuntimeName(), err)
	}
}

// serveOnSocket serves fake over a unix socket of the test's own until
// the test ends, and returns its endpoint.
func serveOnSocket(t testing.TB, fake *fakecri.Runtime) string {
	t.Helper()
	endpoint := "unix://" + filepath.Join(t.TempDir(), "fakecri.sock")
	lis, err := fakecri.ListenUnix(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fakecri.NewServer(fake, fake).Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return endpoint
}
