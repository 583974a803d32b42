package status_test

import (
	"context"
	goruntime "runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/status"
)

// runManager runs m until the test ends.
func runManager(t *testing.T, m *status.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitForWaiter yields until something waits on clk, for 10 s at most.
func waitForWaiter(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !clk.HasWaiters(); goruntime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("nothing waits on the clock after 10s")
		}
	}
}
