// Package backoff tracks per-key exponential back-off delays on an
// injected clock, like client-go's flowcontrol.Backoff but without its
// background goroutine: stale entries are dropped as keys are touched.
// runtime/cri uses it for CrashLoopBackOff and runtime/cri/images for
// ImagePullBackOff.
package backoff

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Policy configures an exponential back-off: Initial, doubling up to
// Max, forgotten after Reset without a failure.
type Policy struct {
	Initial time.Duration
	Max     time.Duration
	// Reset is how long a key must go without a failure to start again
	// from Initial. Zero means twice Max, as in the kubelet.
	Reset time.Duration
}

// WithDefaults returns p with Initial and Max defaulted to initial and
// max when zero, and Reset to twice Max.
func (b Policy) WithDefaults(initial, max time.Duration) Policy {
	if b.Initial == 0 {
		b.Initial = initial
	}
	if b.Max == 0 {
		b.Max = max
	}
	if b.Reset == 0 {
		b.Reset = 2 * b.Max
	}
	return b
}

// Tracker tracks per-key delays. It is safe for concurrent use.
type Tracker struct {
	cfg   Policy
	clock clock.PassiveClock

	// mu guards entries.
	mu      sync.Mutex
	entries map[string]*backoffEntry
}

type backoffEntry struct {
	delay time.Duration
	last  time.Time // when the last attempt after a failure was allowed
}

// New returns a Tracker with no keys. cfg must have its defaults.
func New(cfg Policy, clk clock.PassiveClock) *Tracker {
	return &Tracker{cfg: cfg, clock: clk, entries: map[string]*backoffEntry{}}
}

// Remaining returns how much of the back-off that a failure at ts (a
// container's finish time) started is left now, or 0. A failure more than
// Reset after the last allowed attempt (the container ran that long)
// starts afresh.
func (b *Tracker) Remaining(key string, ts time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entries[key]
	if e == nil || ts.Sub(e.last) > b.cfg.Reset {
		return 0
	}
	return max(e.delay-b.clock.Since(ts), 0)
}

// RemainingSinceUpdate returns how much of the back-off recorded by the
// last Next call is left now, or 0.
func (b *Tracker) RemainingSinceUpdate(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entries[key]
	if e == nil {
		return 0
	}
	since := b.clock.Since(e.last)
	if since > b.cfg.Reset {
		return 0
	}
	return max(e.delay-since, 0)
}

// Next records that an attempt after a failure at ts goes ahead now and
// returns the delay the next failure will wait: Initial when the key is
// new or the failure came more than Reset after the last attempt, else
// double the last delay, up to Max.
func (b *Tracker) Next(key string, ts time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entries[key]
	if e == nil || ts.Sub(e.last) > b.cfg.Reset {
		e = &backoffEntry{delay: b.cfg.Initial}
		b.entries[key] = e
	} else {
		e.delay = min(2*e.delay, b.cfg.Max)
	}
	e.last = b.clock.Now()
	b.gcLocked(e.last)
	return e.delay
}

// gcLocked drops entries that have been quiet for longer than Reset.
func (b *Tracker) gcLocked(now time.Time) {
	if len(b.entries) < 64 {
		return
	}
	for k, e := range b.entries {
		if now.Sub(e.last) > b.cfg.Reset {
			delete(b.entries, k)
		}
	}
}

// Delay returns the key's current delay, or Initial when it has none.
func (b *Tracker) Delay(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.entries[key]; e != nil {
		return e.delay
	}
	return b.cfg.Initial
}
