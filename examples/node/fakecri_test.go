package main

import (
	"context"
	"path/filepath"
	"testing"

	criapi "k8s.io/cri-api/pkg/apis"

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
