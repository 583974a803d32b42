package criclient

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// Back-off of DialWait, the kubelet's wait for its runtime.
const (
	dialWaitFirst = 100 * time.Millisecond
	dialWaitMax   = 5 * time.Second
)

// DialWait is Dial for a runtime that may not be there yet, as a node
// agent started before its runtime needs it: while the socket is
// missing, the runtime unavailable or slow to answer, it logs "waiting
// for the runtime" with the error and tries again after a back-off of
// 100ms doubling to 5s on clk, until the runtime answers or ctx ends.
// Errors that waiting cannot mend (a malformed endpoint, a socket that
// serves no CRI) are returned at once.
func DialWait(ctx context.Context, endpoint string, clk clock.Clock, log logr.Logger, opts ...DialOption) (*Client, error) {
	delay := dialWaitFirst
	for {
		client, err := Dial(ctx, endpoint, opts...)
		if err == nil {
			return client, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for the runtime at %s: %w", endpoint, err)
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, runtime.ErrUnavailable) && !errors.Is(err, runtime.ErrDeadlineExceeded) {
			return nil, err
		}
		log.Info("waiting for the runtime", "endpoint", endpoint, "err", err.Error(), "retryIn", delay.String())
		t := clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for the runtime at %s: %w", endpoint, err)
		case <-t.C():
		}
		delay = min(2*delay, dialWaitMax)
	}
}
