package backoff_test

import (
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/backoff"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestWithDefaults(t *testing.T) {
	got := backoff.Policy{}.WithDefaults(time.Second, time.Minute)
	if want := (backoff.Policy{Initial: time.Second, Max: time.Minute, Reset: 2 * time.Minute}); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	set := backoff.Policy{Initial: 2 * time.Second, Max: 4 * time.Second, Reset: time.Hour}
	if got := set.WithDefaults(time.Second, time.Minute); got != set {
		t.Errorf("a set policy became %+v", got)
	}
}

func TestDoublingUpToMaxAndReset(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := backoff.New(backoff.Policy{Initial: time.Second, Max: 4 * time.Second, Reset: 8 * time.Second}, clk)
	if d := b.Delay("k"); d != time.Second {
		t.Errorf("delay of a new key %s, want Initial", d)
	}
	if left := b.RemainingSinceUpdate("k"); left != 0 {
		t.Errorf("a new key has %s left", left)
	}
	var delays []time.Duration
	for range 4 {
		delays = append(delays, b.Next("k", clk.Now()))
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}; !slices.Equal(delays, want) {
		t.Errorf("delays %v, want %v", delays, want)
	}
	clk.Step(time.Second)
	if left := b.RemainingSinceUpdate("k"); left != 3*time.Second {
		t.Errorf("%s left a second after the update, want 3s", left)
	}
	// A failure at ts: what is left is counted from ts.
	if left := b.Remaining("k", clk.Now().Add(-3*time.Second)); left != time.Second {
		t.Errorf("%s left of a failure 3s ago, want 1s", left)
	}
	// Quiet for longer than Reset: forgotten.
	clk.Step(9 * time.Second)
	if left := b.RemainingSinceUpdate("k"); left != 0 {
		t.Errorf("%s left after Reset, want 0", left)
	}
	if d := b.Next("k", clk.Now()); d != time.Second {
		t.Errorf("delay after Reset %s, want Initial", d)
	}
}
