package pleg_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// lateStream is a fakeStream whose runtime accepts the subscription only
// once accept is closed.
type lateStream struct {
	fakeStream
	accept chan struct{}
}

func (l *lateStream) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	select {
	case <-l.accept:
	case <-ctx.Done():
		return ctx.Err()
	}
	return l.fakeStream.GetContainerEvents(ctx, ch, established)
}

// events reads n events of the generator, failing the test after
// wallLimit, and returns them as "type data", sorted.
func events(t *testing.T, ev pleg.Generator, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		select {
		case e := <-ev.Watch():
			out = append(out, fmt.Sprintf("%s %s", e.Type, e.Data))
		case <-time.After(wallLimit):
			t.Fatalf("%d events within %v, want %d: %v", len(out), wallLimit, n, out)
		}
	}
	sort.Strings(out)
	return out
}

// noEvents fails the test if an event is buffered.
func noEvents(t *testing.T, ev pleg.Generator, when string) {
	t.Helper()
	select {
	case e := <-ev.Watch():
		t.Fatalf("event %+v %s", e, when)
	default:
	}
}

// ready returns the status of a scripted pod with one sandbox and the
// named running containers.
func ready(uid types.UID, containers ...string) *runtime.PodStatus {
	st := &runtime.PodStatus{ID: uid, Name: string(uid), Namespace: "ns",
		SandboxStatuses: []*runtime.SandboxStatus{{ID: "sb-" + string(uid), State: runtime.SandboxStateReady}}}
	for _, c := range containers {
		st.ContainerStatuses = append(st.ContainerStatuses, &runtime.ContainerStatus{ID: runtime.ContainerID{Type: "fake", ID: c + "-" + string(uid)}, Name: c, State: runtime.ContainerStateRunning})
	}
	return st
}

// The stream counts as up only once the runtime has accepted the
// subscription; until then the generator relists, and what changed
// before the subscription is caught by the relist that follows it.
func TestEventedIsNotUpBeforeTheRuntimeAcceptsTheStream(t *testing.T) {
	rt := newScripted("a")
	clk := clocktesting.NewFakeClock(t0)
	rt.clock = clk
	cache := pleg.NewCache()
	stream := &lateStream{fakeStream: *newFakeStream(), accept: make(chan struct{})}
	ev, err := pleg.NewEvented(pleg.EventedConfig{Config: pleg.Config{Runtime: rt, Cache: cache, Clock: clk, EventBuffer: 100}, Streamer: stream})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ev.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	events(t, ev, 2) // a's, from the first relist

	// Ten seconds of the clock without the subscription: not up.
	deadline := time.Now().Add(time.Second)
	for i := 0; i < 100 && time.Now().Before(deadline); i++ {
		clk.Step(100 * time.Millisecond)
		yield()
		if ev.Streaming() {
			t.Fatalf("streaming after %v of the clock, before the runtime accepted the subscription", time.Duration(i+1)*100*time.Millisecond)
		}
	}
	// b starts while nothing is subscribed: no event will name it.
	rt.set(func() { rt.pods["b"] = ready("b", "c") })
	close(stream.accept)
	waitFor(t, "the stream is up", func() bool {
		if !ev.Streaming() {
			clk.Step(100 * time.Millisecond)
		}
		return ev.Streaming()
	})
	if diff := cmp.Diff([]string{"ContainerStarted c-b", "ContainerStarted sb-b"}, events(t, ev, 2)); diff != "" {
		t.Errorf("events of a pod started before the subscription (-want +got):\n%s", diff)
	}
}

// A pod held back after a slow inspection keeps only its own readers
// waiting: the global timestamp moves for every other pod, on the tick
// and at a relist, but never vouches for the held-back pod past its
// pending event.
func TestEventedHeldBackPodKeepsOnlyItsReadersWaiting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		safety time.Duration
	}{
		{"tick", 0},
		{"safety relist", time.Second}, // a relist at every tick
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newScripted("a", "b")
			_, stream, clk, cache := startScriptedWith(t, rt, func(c *pleg.EventedConfig) { c.SafetyRelistPeriod = tc.safety })
			rt.set(func() { rt.took["a"] = time.Second })
			before, _ := cache.Get("a")
			stream.send(t, "a")
			rt.nextCall(t, "for the first event")
			stale := settled(t, cache, "a", before)

			// a changes in a way no relist sees (its IP), and says so.
			rt.set(func() { rt.pods["a"].IPs = []string{"10.0.0.2"} })
			stream.send(t, "a")
			held := clk.Now()
			now, cancel := context.WithCancel(context.Background())
			cancel()
			for i := 1; i <= 3; i++ {
				// b's reader is served by the global timestamp.
				if st, err := readAfterStep(t, clk, cache, "b", held, time.Second); err != nil || st.FindContainerStatus("c") == nil {
					t.Fatalf("%ds after a was held back: b's status %+v, %v", i, st, err)
				}
				if st, err := cache.GetNewerThan(now, "a", held); err == nil {
					t.Fatalf("%ds after a was held back: a's status %+v (IPs %v) served as newer than its pending event", i, st, st.IPs)
				}
			}
			clk.Step(time.Second) // a's cooling (4s) ends
			st, err := freshAfter(t, cache, "a", held)
			if err != nil || st == stale || !cmp.Equal(st.IPs, []string{"10.0.0.2"}) {
				t.Fatalf("a's status once let go: %+v, %v", st, err)
			}
		})
	}
}

// The relists and the stream's inspections keep one record per pod: a
// safety relist reports what changed since the last inspection, not
// since the last relist, so it neither misses a removal the stream did
// not report nor repeats one it did.
func TestEventedSafetyRelistComparesWithTheLastInspection(t *testing.T) {
	rt := newScripted("a", "b")
	ev, stream, clk, cache := startScriptedWith(t, rt, func(c *pleg.EventedConfig) { c.SafetyRelistPeriod = time.Minute })

	// a gains a container c2, seen through its event.
	rt.set(func() { rt.pods["a"] = ready("a", "c", "c2") })
	stream.send(t, "a")
	if diff := cmp.Diff([]string{"ContainerStarted c2-a"}, events(t, ev, 1)); diff != "" {
		t.Fatalf("events of a (-want +got):\n%s", diff)
	}
	// b's container goes, seen through its event.
	rt.set(func() { rt.pods["b"] = ready("b") })
	stream.send(t, "b")
	if diff := cmp.Diff([]string{"ContainerDied c-b", "ContainerRemoved c-b"}, events(t, ev, 2)); diff != "" {
		t.Fatalf("events of b (-want +got):\n%s", diff)
	}
	// c2 goes with no event (the stream missed it).
	rt.set(func() { rt.pods["a"] = ready("a", "c") })
	for len(rt.called) > 0 {
		<-rt.called
	}
	clk.Step(time.Minute) // the safety relist
	if diff := cmp.Diff([]string{"ContainerDied c2-a", "ContainerRemoved c2-a"}, events(t, ev, 2)); diff != "" {
		t.Fatalf("events of the safety relist (-want +got):\n%s", diff)
	}
	if got := rt.nextCall(t, "by the safety relist"); got != "a" {
		t.Fatalf("the safety relist inspected %s, want a", got)
	}
	if st, _ := cache.Get("a"); st.FindContainerStatus("c2") != nil {
		t.Errorf("the cache kept a's removed container: %+v", st)
	}
	// Once the relist is over (the inspector takes the next event), it
	// has sent nothing more: nothing of b again.
	stream.send(t, "z")
	if got := rt.nextCall(t, "for the next event"); got != "z" {
		t.Fatalf("inspected %s, want z", got)
	}
	noEvents(t, ev, "after the safety relist")
}

// A failed inspection keeps the pod's last good status and record: the
// cache holds it beside the error, and the retry that succeeds reports
// what changed since that status.
func TestEventedFailedInspectionKeepsTheLastGoodStatus(t *testing.T) {
	rt := newScripted("a")
	ev, stream, clk, cache := startScripted(t, rt)
	rt.set(func() {
		rt.failing["a"] = true
		rt.pods["a"] = ready("a") // c is gone
	})
	stream.send(t, "a")
	rt.nextCall(t, "for the event")
	waitFor(t, "the cache holds the inspection error", func() bool { _, err := cache.Get("a"); return err != nil })
	if st, _ := cache.Get("a"); st == nil || st.FindContainerStatus("c") == nil {
		t.Errorf("after a failed inspection the cache lost the last good status: %+v", st)
	}
	rt.set(func() { delete(rt.failing, "a") })
	clk.Step(time.Second)
	rt.nextCall(t, "for the retry")
	if diff := cmp.Diff([]string{"ContainerDied c-a", "ContainerRemoved c-a"}, events(t, ev, 2)); diff != "" {
		t.Errorf("events of the successful retry (-want +got):\n%s", diff)
	}
	noEvents(t, ev, "after the successful retry")
}

// Readers waiting for a pod found gone get its empty status at once,
// without waiting for the global timestamp.
func TestEventedRemovalWakesReadersOfThePod(t *testing.T) {
	rt := newScripted("a")
	_, stream, clk, cache := startScripted(t, rt)
	lastSync := clk.Now()
	type result struct {
		st  *runtime.PodStatus
		err error
	}
	got := make(chan result, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		st, err := cache.GetNewerThan(ctx, "a", lastSync)
		got <- result{st, err}
	}()
	clk.Step(time.Nanosecond) // no tick: the global timestamp stays
	rt.set(func() { delete(rt.pods, "a") })
	stream.send(t, "a")
	rt.nextCall(t, "for the event")
	select {
	case r := <-got:
		if r.err != nil || r.st.ID != "a" || len(r.st.ContainerStatuses)+len(r.st.SandboxStatuses) != 0 {
			t.Errorf("a reader of the removed pod got %+v, %v; want an empty status", r.st, r.err)
		}
	case <-time.After(wallLimit):
		t.Fatal("the reader of the removed pod was not woken")
	}
}

// A pod whose inspection failed in one of the generator's own relists
// (here the first ones) is retried with the evented back-off, not at the
// next safety relist.
func TestEventedRetriesRelistFailuresWithBackOff(t *testing.T) {
	rt := newScripted("a")
	rt.failing["a"] = true
	// How many relists fail before the stream is up depends on how far
	// the clock moved meanwhile; a cap on the back-off bounds the wait
	// for the retry whatever their count.
	_, _, clk, cache := startScriptedWith(t, rt, func(c *pleg.EventedConfig) { c.InspectBackOffMax = 4 * time.Second })
	if _, err := cache.Get("a"); err == nil {
		t.Fatal("the cache holds no error after the failed relists")
	}
	rt.set(func() { delete(rt.failing, "a") })
	clk.Step(4 * time.Second) // the longest back-off, far short of the safety relist
	if got := rt.nextCall(t, "for the retry"); got != "a" {
		t.Fatalf("inspected %s, want a", got)
	}
	waitFor(t, "the cache drops the error", func() bool { _, err := cache.Get("a"); return err == nil })
}

// The global timestamp moves on while an inspection is under way, for
// every pod but the one inspected, whose readers wait for the
// inspection.
func TestEventedInspectionUnderWayKeepsOnlyItsReadersWaiting(t *testing.T) {
	rt := newScripted("a", "b")
	_, stream, clk, cache := startScripted(t, rt)
	gate := make(chan struct{}) // closed by startScripted's cleanup
	rt.set(func() {
		rt.gates["a"] = gate
		rt.pods["a"].IPs = []string{"10.0.0.2"}
	})
	stream.send(t, "a")
	rt.nextCall(t, "for the event")
	sent := clk.Now()
	now, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 1; i <= 3; i++ {
		if _, err := readAfterStep(t, clk, cache, "b", sent, time.Second); err != nil {
			t.Fatalf("b: %v", err)
		}
		if st, err := cache.GetNewerThan(now, "a", sent); err == nil {
			t.Fatalf("%ds into a's inspection: a's status %+v served as newer than its event", i, st)
		}
	}
}

// An event received just before a tick keeps its pod's readers waiting
// for its inspection: the tick never serves them the status from before
// the event.
func TestEventedTickNeverVouchesForAReceivedEvent(t *testing.T) {
	const rounds = 50
	var uids []types.UID
	for i := range rounds {
		uids = append(uids, types.UID(fmt.Sprint("p", i)))
	}
	rt := newScripted(uids...)
	_, stream, clk, cache := startScripted(t, rt)
	for i, uid := range uids {
		ip := fmt.Sprint("10.0.0.", i)
		rt.set(func() { rt.pods[uid].IPs = []string{ip} })
		sent := clk.Now()
		stream.send(t, uid)
		st, err := readAfterStep(t, clk, cache, uid, sent, time.Second)
		if err != nil || !cmp.Equal(st.IPs, []string{ip}) {
			t.Fatalf("round %d: a reader of %s got %+v, %v: the status from before the event", i, uid, st, err)
		}
		rt.nextCall(t, "for the event")
	}
}

// With nothing happening and no reader waiting, the generator stays
// healthy however long it idles.
func TestEventedIdleStaysHealthy(t *testing.T) {
	rt := newScripted("a")
	ev, _, clk, _ := startScripted(t, rt)
	// Thirty idle minutes, in steps well under RelistThreshold (3 min).
	// A relist started at one step may still be under way, in wall time,
	// at the next: it must then end, and the generator be healthy, within
	// the wall limit. A stuck loop never is.
	for i := 1; i <= 60; i++ {
		clk.Step(30 * time.Second)
		var last error
		deadline := time.Now().Add(wallLimit)
		for last = ev.Healthy(); last != nil && time.Now().Before(deadline); last = ev.Healthy() {
			yield()
		}
		if last != nil {
			t.Fatalf("after %v idle: %v", time.Duration(i)*30*time.Second, last)
		}
	}
}

// A runtime slower than the settle time to put the subscription in place
// sends no event for what happens meanwhile (over gRPC the stream counts
// as established once the request is sent): one more relist,
// RelistPeriod after the first, catches it before the stream counts as
// up.
func TestEventedRelistsOnceMoreBeforeTheStreamIsUp(t *testing.T) {
	rt := newScripted("a")
	clk := clocktesting.NewFakeClock(t0)
	rt.clock = clk
	ev, err := pleg.NewEvented(pleg.EventedConfig{Config: pleg.Config{Runtime: rt, Cache: pleg.NewCache(), Clock: clk, EventBuffer: 100}, Streamer: newFakeStream()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ev.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	events(t, ev, 2) // a's, from the first relist
	// The relist that follows the settle time.
	waitFor(t, "the relist after the subscription", func() bool {
		if rt.lists.Load() < 2 {
			clk.Step(50 * time.Millisecond)
		}
		return rt.lists.Load() >= 2
	})
	// b starts before the runtime's subscription is really in place: no
	// event names it.
	rt.set(func() { rt.pods["b"] = ready("b", "c") })
	waitFor(t, "the stream is up", func() bool {
		if !ev.Streaming() {
			clk.Step(100 * time.Millisecond)
		}
		return ev.Streaming()
	})
	if diff := cmp.Diff([]string{"ContainerStarted c-b", "ContainerStarted sb-b"}, events(t, ev, 2)); diff != "" {
		t.Errorf("events of a pod started while the subscription was being put in place (-want +got):\n%s", diff)
	}
}
