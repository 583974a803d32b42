package cri

import (
	"time"

	"github.com/nodekit/nodekit/internal/backoff"
)

// BackOff configures an exponential back-off: Initial, doubling up to
// Max, forgotten after Reset without a failure.
type BackOff struct {
	Initial time.Duration
	Max     time.Duration
	// Reset is how long a key must go without a failure to start again
	// from Initial. Zero means twice Max, as in the kubelet.
	Reset time.Duration
}

func (b BackOff) withDefaults(initial, max time.Duration) BackOff {
	return BackOff(backoff.Policy(b).WithDefaults(initial, max))
}
