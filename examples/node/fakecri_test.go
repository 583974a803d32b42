package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	criapi "k8s.io/cri-api/pkg/apis"

	"github.com/nodekit/nodekit/internal/syncbuf"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// serveFakeCRI serves rs (nil: fake itself) and fake's image service on
// a unix socket in dir until the test ends, and returns its endpoint.
func serveFakeCRI(t *testing.T, dir string, fake *fakecri.Runtime, rs criapi.RuntimeService) string {
	t.Helper()
	if rs == nil {
		rs = fake
	}
	endpoint := "unix://" + filepath.Join(dir, "cri.sock")
	lis, err := fakecri.ListenUnix(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fakecri.NewServer(rs, fake).Serve(ctx, lis) }()
	t.Cleanup(func() { stop(); <-done })
	return endpoint
}

// startRun runs the command with o until the returned stop is called or
// the test ends; stop fails the test if run returned an error or did not
// return within 30s. It returns what run logged.
func startRun(t testing.TB, ctx context.Context, o options) (*syncbuf.Buffer, func()) {
	t.Helper()
	errOut := &syncbuf.Buffer{}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, o, errOut) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run = %v\n%s", err, errOut.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("run did not return within 30s of its context ending\n%s", errOut.String())
		}
	}
	t.Cleanup(stop)
	return errOut, stop
}
