package syncloop_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/syncloop"
)

// dueTimes stands in for the pod workers' due times: Due, NextDue and
// DueChanged as podworkers has them, with every Due call recorded.
type dueTimes struct {
	mu    sync.Mutex
	at    map[types.UID]time.Time
	calls []time.Time // the now of every Due call

	changed chan struct{} // DueChanged
	asked   chan struct{} // receives on every NextDue call
}

func newDueTimes() *dueTimes {
	return &dueTimes{at: map[types.UID]time.Time{}, changed: make(chan struct{}, 1), asked: make(chan struct{}, 100)}
}

func (d *dueTimes) Due(now time.Time) []types.UID {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, now)
	var out []types.UID
	for uid, at := range d.at {
		if !now.Before(at) {
			out = append(out, uid)
			delete(d.at, uid)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (d *dueTimes) NextDue() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var next time.Time
	for _, at := range d.at {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	d.asked <- struct{}{}
	return next, !next.IsZero()
}

// set makes uid due at at and tells the loop, as a pod worker does.
func (d *dueTimes) set(uid types.UID, at time.Time) {
	d.mu.Lock()
	d.at[uid] = at
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

func (d *dueTimes) dueCalls() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.calls...)
}

// startResync starts a loop on d's due times with n known pods, named
// p000..., and housekeeping a day apart so that it stays out of the
// way; it returns once the loop has set its first timer.
func startResync(t *testing.T, d *dueTimes, n int) (*env, map[types.UID]*v1.Pod) {
	t.Helper()
	pods := map[types.UID]*v1.Pod{}
	for i := range n {
		name := fmt.Sprintf("p%03d", i)
		pods[types.UID(name)] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
	}
	pods["uid-b"] = known["uid-b"] // quiet's marker
	e := startWith(t, nil, func(c *syncloop.Config) {
		c.Due, c.NextDue, c.DueChanged = d.Due, d.NextDue, d.changed
		c.Lookup = func(uid types.UID) (*v1.Pod, bool) { p, ok := pods[uid]; return p, ok }
		c.HousekeepingPeriod = 24 * time.Hour
	})
	e.asked(d)
	return e, pods
}

// asked waits until the loop asked NextDue and has acted on the answer
// (it takes the next input only after setting its timer).
func (e *env) asked(d *dueTimes) {
	e.t.Helper()
	select {
	case <-d.asked:
	case <-time.After(10 * time.Second):
		e.t.Fatal("the loop did not ask NextDue within 10s")
	}
	e.quiet()
}

// stepTo moves the fake clock a second at a time to origin+to, letting
// the loop take what each step sets off before the next.
func (e *env) stepTo(origin time.Time, to time.Duration) {
	e.t.Helper()
	for e.clk.Now().Before(origin.Add(to)) {
		e.clk.Step(min(time.Second, origin.Add(to).Sub(e.clk.Now())))
		e.quiet()
	}
}

func names(n int) string {
	var s []string
	for i := range n {
		s = append(s, fmt.Sprintf("p%03d", i))
	}
	return strings.Join(s, ",")
}

// An idle loop whose pods are due in a minute does not wake before: no
// Due call until the minute is up, then one that resyncs them all.
func TestIdleLoopWakesOnlyWhenAPodIsDue(t *testing.T) {
	const n = 100
	d := newDueTimes()
	origin := time.Unix(1000, 0) // the fake clock's start
	for i := range n {
		d.at[types.UID(fmt.Sprintf("p%03d", i))] = origin.Add(time.Minute)
	}
	e, _ := startResync(t, d, n)
	e.stepTo(origin, 59*time.Second)
	if calls := d.dueCalls(); len(calls) != 0 {
		t.Fatalf("Due was called %d times in the 59s before any pod was due, first at %v", len(calls), calls[0].Sub(origin))
	}
	e.clk.Step(time.Second)
	if got, want := e.next(), "sync:"+names(n); got != want {
		t.Errorf("dispatched %q, want %q", got, want)
	}
	e.asked(d) // the loop asked again, and nothing is due
	if calls := d.dueCalls(); len(calls) != 1 || !calls[0].Equal(origin.Add(time.Minute)) {
		t.Errorf("Due called at %v after the start, want once, at 1m", calls)
	}
	// Nothing is due any more: an hour goes by without a Due call.
	e.stepTo(origin, time.Hour+time.Minute)
	if calls := d.dueCalls(); len(calls) != 1 {
		t.Errorf("Due called %d times with nothing due, want no more than the one at 1m", len(calls))
	}
}

// A pod that becomes due while the loop sleeps (a failed sync's retry
// after its back-off) wakes it: the pod is resynced at the first tick of
// the SyncPeriod grid at or after its due time, and nothing is collected
// on the ticks in between.
func TestEarlierDueTimeWakesTheSleepingLoop(t *testing.T) {
	d := newDueTimes()
	origin := time.Unix(1000, 0)
	d.at["p000"] = origin.Add(time.Minute)
	e, _ := startResync(t, d, 2)
	e.stepTo(origin, 5*time.Second)
	// Set while the loop sleeps, between two ticks.
	d.set("p001", origin.Add(15*time.Second+300*time.Millisecond))
	e.asked(d)
	e.stepTo(origin, 15*time.Second)
	if calls := d.dueCalls(); len(calls) != 0 {
		t.Fatalf("Due called at %v after the start, before the retry's tick", calls[0].Sub(origin))
	}
	e.clk.Step(time.Second)
	if got := e.next(); got != "sync:p001" {
		t.Errorf("dispatched %q at 16s, want sync:p001", got)
	}
	e.asked(d)
	e.stepTo(origin, 59*time.Second)
	e.clk.Step(time.Second)
	if got := e.next(); got != "sync:p000" {
		t.Errorf("dispatched %q at 1m, want sync:p000, its resync unchanged", got)
	}
	e.asked(d)
	var at []time.Duration
	for _, c := range d.dueCalls() {
		at = append(at, c.Sub(origin))
	}
	if want := []time.Duration{16 * time.Second, time.Minute}; fmt.Sprint(at) != fmt.Sprint(want) {
		t.Errorf("Due called at %v after the start, want %v", at, want)
	}
}

// A pod due now is collected at the next tick, not at once, so that one
// tick never collects twice and a loop of immediate due times cannot spin.
func TestDueNowWaitsForTheNextTick(t *testing.T) {
	d := newDueTimes()
	origin := time.Unix(1000, 0)
	e, _ := startResync(t, d, 1)
	e.stepTo(origin, 2500*time.Millisecond)
	d.set("p000", e.clk.Now())
	e.asked(d)
	e.clk.Step(400 * time.Millisecond) // 2.9s
	e.quiet()
	e.clk.Step(100 * time.Millisecond) // 3s
	if got := e.next(); got != "sync:p000" {
		t.Errorf("dispatched %q, want sync:p000", got)
	}
	e.asked(d)
	if calls := d.dueCalls(); len(calls) != 1 || !calls[0].Equal(origin.Add(3*time.Second)) {
		t.Errorf("Due called at %v, want once, at the 3s tick", calls)
	}
}

func TestNextDueNeedsDueChanged(t *testing.T) {
	d := newDueTimes()
	_, err := syncloop.New(syncloop.Config{
		Handler: &recorder{}, Updates: make(chan podsource.Update), Lookup: func(types.UID) (*v1.Pod, bool) { return nil, false },
		Due: d.Due, NextDue: d.NextDue,
	})
	if err == nil {
		t.Error("New accepted NextDue without DueChanged: the loop could sleep through an earlier due time")
	}
}
