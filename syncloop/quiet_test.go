package syncloop_test

import (
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/syncloop"
)

// While Quiet holds, housekeeping runs every QuietHousekeepingPeriod (20 s)
// on the HousekeepingPeriod grid; a source update or a PLEG event, of an
// unknown pod too, brings the next pass back to the next 2 s tick; and
// once Quiet no longer holds, passes are 2 s apart again.
func TestQuietHousekeeping(t *testing.T) {
	var quiet atomic.Bool
	quiet.Store(true)
	barrier := make(chan struct{})
	e := startWith(t, nil, func(c *syncloop.Config) {
		c.Quiet = quiet.Load
		// No resyncs; DueChanged serves as a barrier: a send returns
		// once the loop is back in its select, its timers set.
		c.NextDue = func() (time.Time, bool) { return time.Time{}, false }
		c.DueChanged = barrier
	})
	origin := e.clk.Now()
	settled := func() { barrier <- struct{}{} }
	step := func(to time.Duration) {
		t.Helper()
		for e.clk.Now().Sub(origin) < to {
			e.clk.Step(2 * time.Second)
			settled()
		}
	}
	cleanupAt := func(at time.Duration) {
		t.Helper()
		step(at)
		if got := e.next(); got != "cleanup" {
			t.Fatalf("at %v: dispatched %q, want cleanup", at, got)
		}
		settled()
	}
	waitForTickers(t, e.clk)
	cleanupAt(2 * time.Second)

	// Quiet: no pass at 4, 6, ... 20 s. The ADD at 20 s is the next
	// dispatch, so none came before it.
	step(20 * time.Second)
	e.updates <- podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{known["uid-a"]}}
	if got := e.next(); got != "add:a" {
		t.Fatalf("dispatched %q while quiet, want nothing before the ADD at 20s", got)
	}
	settled()
	cleanupAt(22 * time.Second) // the ADD brought it back from 42 s

	// A PLEG event of a pod the loop does not know (an orphan) too.
	step(24 * time.Second)
	e.events <- &pleg.Event{ID: "uid-orphan", Type: pleg.ContainerStarted}
	settled()
	cleanupAt(26 * time.Second)

	// No longer quiet: every 2 s.
	quiet.Store(false)
	step(40 * time.Second) // quiet at 26 s: the pass after it is at 46 s
	e.updates <- podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{known["uid-b"]}}
	if got := e.next(); got != "add:b" {
		t.Fatalf("dispatched %q, want nothing before the ADD at 40s", got)
	}
	settled()
	cleanupAt(42 * time.Second)
	cleanupAt(44 * time.Second)
	cleanupAt(46 * time.Second)
}

// Without Quiet, passes are HousekeepingPeriod apart whatever happens.
func TestHousekeepingWithoutQuietKeepsItsPeriod(t *testing.T) {
	e := start(t, nil)
	waitForTickers(t, e.clk)
	cleanupEvery2s(t, e, 12)
}

// A resync leaves housekeeping nothing: a quiet node whose pods resync
// stays quiet.
func TestResyncKeepsHousekeepingQuiet(t *testing.T) {
	barrier := make(chan struct{})
	var resynced atomic.Bool
	e := startWith(t, nil, func(c *syncloop.Config) {
		c.Quiet = func() bool { return true }
		origin := time.Unix(1000, 0) // the fake clock's start
		c.NextDue = func() (time.Time, bool) { return origin.Add(5 * time.Second), !resynced.Load() }
		c.Due = func(now time.Time) []types.UID {
			if now.Before(origin.Add(5*time.Second)) || resynced.Swap(true) {
				return nil
			}
			return []types.UID{"uid-a"}
		}
		c.DueChanged = barrier
	})
	origin := e.clk.Now()
	settled := func() { barrier <- struct{}{} }
	waitForTickers(t, e.clk)
	e.clk.Step(2 * time.Second)
	if got := e.next(); got != "cleanup" {
		t.Fatalf("at 2s: dispatched %q, want cleanup", got)
	}
	settled()
	for e.clk.Now().Sub(origin) < 20*time.Second {
		e.clk.Step(time.Second)
		settled()
	}
	e.updates <- podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{known["uid-b"]}}
	if got := e.next(); got != "sync:a" {
		t.Fatalf("dispatched %q, want the resync at 6s", got)
	}
	if got := e.next(); got != "add:b" {
		t.Fatalf("dispatched %q after the resync, want nothing before the ADD at 20s", got)
	}
}
