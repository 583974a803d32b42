package pleg_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// wallLimit bounds every wait of these tests for the generator's
// goroutines.
const wallLimit = 10 * time.Second

// scripted is a runtime whose pods and inspections the test controls.
// Only GetPods and GetPodStatus are implemented.
type scripted struct {
	runtime.Runtime

	called chan types.UID // every GetPodStatus call, in order
	clock  *clocktesting.FakeClock
	lists  atomic.Int32 // GetPods calls

	// mu guards the fields below.
	mu      sync.Mutex
	pods    map[types.UID]*runtime.PodStatus
	failing map[types.UID]bool
	gates   map[types.UID]chan struct{}
	// took: how long an inspection of the pod takes on the clock.
	took map[types.UID]time.Duration
}

func newScripted(uids ...types.UID) *scripted {
	s := &scripted{called: make(chan types.UID, 10000), pods: map[types.UID]*runtime.PodStatus{}, failing: map[types.UID]bool{}, gates: map[types.UID]chan struct{}{}, took: map[types.UID]time.Duration{}}
	for _, uid := range uids {
		s.pods[uid] = &runtime.PodStatus{
			ID: uid, Name: string(uid), Namespace: "ns",
			SandboxStatuses:   []*runtime.SandboxStatus{{ID: "sb-" + string(uid), State: runtime.SandboxStateReady}},
			ContainerStatuses: []*runtime.ContainerStatus{{ID: runtime.ContainerID{Type: "fake", ID: "c-" + string(uid)}, Name: "c", State: runtime.ContainerStateRunning}},
		}
	}
	return s
}

// GetPods lists every sandbox and container, exited or not, as
// runtime/cri's GetPods(ctx, true) does.
func (s *scripted) GetPods(context.Context, bool) ([]*runtime.Pod, error) {
	defer s.lists.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*runtime.Pod
	for uid, st := range s.pods {
		p, _ := st.RunningPod(true)
		p.ID = uid
		p.Containers = nil
		for _, c := range st.ContainerStatuses {
			p.Containers = append(p.Containers, &runtime.Container{ID: c.ID, Name: c.Name, State: c.State})
		}
		out = append(out, p)
	}
	return out, nil
}

func (s *scripted) GetPodStatus(ctx context.Context, uid types.UID, name, ns string) (*runtime.PodStatus, error) {
	s.called <- uid
	s.mu.Lock()
	gate := s.gates[uid]
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.took[uid]; d > 0 {
		s.clock.Step(d)
	}
	if s.failing[uid] {
		return nil, fmt.Errorf("inspecting %s: %w", uid, runtime.ErrUnavailable)
	}
	if st := s.pods[uid]; st != nil {
		cp := *st // a new value per inspection, told apart in the cache
		return &cp, nil
	}
	return &runtime.PodStatus{ID: uid, Name: name, Namespace: ns}, nil
}

func (s *scripted) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// nextCall returns the next pod inspected, failing the test after
// wallLimit.
func (s *scripted) nextCall(t *testing.T, what string) types.UID {
	t.Helper()
	select {
	case uid := <-s.called:
		return uid
	case <-time.After(wallLimit):
		t.Fatalf("no inspection %s within %v", what, wallLimit)
		return ""
	}
}

// noCall fails the test if a pod was inspected.
func (s *scripted) noCall(t *testing.T, when string) {
	t.Helper()
	select {
	case uid := <-s.called:
		t.Fatalf("pod %s inspected %s", uid, when)
	default:
	}
}

// fakeStream is an event stream the test feeds with send.
type fakeStream struct {
	events chan *runtimeapi.ContainerEventResponse
	// forwarded: an event taken from events was handed to the generator.
	forwarded chan struct{}
}

func newFakeStream() *fakeStream {
	return &fakeStream{events: make(chan *runtimeapi.ContainerEventResponse), forwarded: make(chan struct{})}
}

// GetContainerEvents reports the subscription established at once, as
// fakecri does, then forwards what send delivers.
func (f *fakeStream) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if established != nil {
		established(nil)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-f.events:
			select {
			case ch <- ev:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case f.forwarded <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// send delivers a started event of the pod, with every container's
// status as containerd sends it, and returns once the generator has
// received it, failing the test if it does not within wallLimit.
func (f *fakeStream) send(t *testing.T, uid types.UID) {
	t.Helper()
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        "c-" + string(uid),
		ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
		PodSandboxStatus:   &runtimeapi.PodSandboxStatus{Id: "sb-" + string(uid), Metadata: &runtimeapi.PodSandboxMetadata{Uid: string(uid), Name: string(uid), Namespace: "ns"}},
		ContainersStatuses: []*runtimeapi.ContainerStatus{{Id: "c-" + string(uid), State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	}
	timeout := time.After(wallLimit)
	select {
	case f.events <- ev:
	case <-timeout:
		t.Fatalf("the generator stopped reading the event stream (sending an event of %s)", uid)
	}
	select {
	case <-f.forwarded:
	case <-timeout:
		t.Fatalf("the generator stopped reading the event stream (sending an event of %s)", uid)
	}
}

// startScripted runs an evented generator on rt and a fake stream and
// returns once the stream is up.
func startScripted(t *testing.T, rt *scripted) (*pleg.Evented, *fakeStream, *clocktesting.FakeClock, *pleg.Cache) {
	t.Helper()
	return startScriptedWith(t, rt, nil)
}

// startScriptedWith is startScripted with the configuration changed by
// configure (if not nil).
func startScriptedWith(t *testing.T, rt *scripted, configure func(*pleg.EventedConfig)) (*pleg.Evented, *fakeStream, *clocktesting.FakeClock, *pleg.Cache) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	rt.clock = clk
	cache := pleg.NewCache()
	stream := newFakeStream()
	cfg := pleg.EventedConfig{
		Config:   pleg.Config{Runtime: rt, Cache: cache, Clock: clk, EventBuffer: 1000},
		Streamer: stream,
	}
	if configure != nil {
		configure(&cfg)
	}
	ev, err := pleg.NewEvented(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ev.Run(ctx) }()
	t.Cleanup(func() {
		rt.set(func() {
			for uid, g := range rt.gates {
				close(g)
				delete(rt.gates, uid)
			}
		})
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	// The stream counts as up once it stood for 100ms of the clock.
	waitFor(t, "the stream is up", func() bool {
		if !ev.Streaming() {
			clk.Step(100 * time.Millisecond)
		}
		return ev.Streaming()
	})
	for len(rt.called) > 0 {
		<-rt.called // the relists' inspections
	}
	for len(ev.Watch()) > 0 {
		<-ev.Watch() // the events of the first relist
	}
	return ev, stream, clk, cache
}

// waitFor polls cond for up to wallLimit, yielding in between.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wallLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		yield()
	}
}

// freshAfter waits until the cache holds an observation of uid (or a
// global update) that began after t, and returns it.
func freshAfter(t *testing.T, cache *pleg.Cache, uid types.UID, after time.Time) (*runtime.PodStatus, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wallLimit)
	defer cancel()
	st, err := cache.GetNewerThan(ctx, uid, after)
	if ctx.Err() != nil {
		t.Fatalf("no observation of %s after %v within %v", uid, after, wallLimit)
	}
	return st, err
}

// readAfterStep starts a reader of uid waiting for a status newer than
// after, steps the clock by d once it waits (or was served), and returns
// what it is served, failing the test after wallLimit.
func readAfterStep(t *testing.T, clk *clocktesting.FakeClock, cache *pleg.Cache, uid types.UID, after time.Time, d time.Duration) (*runtime.PodStatus, error) {
	t.Helper()
	type result struct {
		st  *runtime.PodStatus
		err error
	}
	got := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), wallLimit)
	defer cancel()
	go func() {
		st, err := cache.GetNewerThan(ctx, uid, after)
		got <- result{st, err}
	}()
	waitFor(t, "a reader of "+string(uid)+" waits", func() bool { return cache.Waiting(uid) || len(got) > 0 })
	clk.Step(d)
	r := <-got
	if ctx.Err() != nil {
		t.Fatalf("no observation of %s after %v within %v", uid, after, wallLimit)
	}
	return r.st, r.err
}

// Events for a pod being inspected, or already queued, never hold up the
// stream: the pods wait in a queue, each once however many events named
// it, in the order of their first event, and each is inspected once.
func TestEventedCoalescesEventsPerPod(t *testing.T) {
	rt := newScripted("a", "b", "c", "d")
	ev, stream, _, _ := startScripted(t, rt)
	gate := make(chan struct{})
	rt.set(func() { rt.gates["a"] = gate })

	stream.send(t, "a")
	if got := rt.nextCall(t, "for the first event"); got != "a" {
		t.Fatalf("inspected %s, want a", got)
	}
	// a's inspection is blocked; 1000 events arrive for b, c and d.
	stream.send(t, "b")
	stream.send(t, "c")
	for i := 0; i < 1000; i++ {
		stream.send(t, "b")
	}
	stream.send(t, "d")
	stream.send(t, "c")
	stream.send(t, "a") // a changed again during its inspection
	want := []types.UID{"b", "c", "d", "a"}
	waitFor(t, "the queue holds b, c, d, a", func() bool { return cmp.Equal(want, ev.Queued()) })

	close(gate)
	rt.set(func() { delete(rt.gates, "a") })
	var got []types.UID
	for range want {
		got = append(got, rt.nextCall(t, "after a's inspection"))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inspections after the blocked one (-want +got):\n%s", diff)
	}
	waitFor(t, "the queue is empty", func() bool { return len(ev.Queued()) == 0 })
	rt.noCall(t, "once the queue was empty")
}

// A pod whose inspection failed keeps the error in the cache and is
// inspected again after 1s, 2s, 4s... until an inspection succeeds.
func TestEventedRetriesFailedInspectionWithBackOff(t *testing.T) {
	rt := newScripted("a")
	ev, stream, clk, cache := startScripted(t, rt)
	rt.set(func() { rt.failing["a"] = true })

	stream.send(t, "a")
	rt.nextCall(t, "for the event")
	waitFor(t, "the cache holds the inspection error", func() bool { _, err := cache.Get("a"); return err != nil })
	// Retries at +1s, +3s (after 2s), +7s (after 4s).
	for i, step := range []struct {
		d     time.Duration
		retry bool
	}{{time.Second, true}, {time.Second, false}, {time.Second, true}, {3 * time.Second, false}, {time.Second, true}} {
		if i == 4 {
			rt.set(func() { rt.failing["a"] = false })
		}
		_, before := cache.Get("a")
		clk.Step(step.d)
		if step.retry {
			rt.nextCall(t, fmt.Sprintf("at step %d", i))
			waitFor(t, "the retry is recorded", func() bool { _, err := cache.Get("a"); return err != before })
		}
		rt.noCall(t, fmt.Sprintf("at step %d", i))
		st, err := cache.Get("a")
		if i < 4 && err == nil {
			t.Fatalf("step %d: the cache lost the inspection error", i)
		}
		if i == 4 && (err != nil || st.FindContainerStatus("c") == nil) {
			t.Fatalf("after a successful retry the cache holds %+v, %v", st, err)
		}
	}
	// The success ended the retries; the pod did not change, so there is
	// no event.
	noEvents(t, ev, "after a successful retry of an unchanged pod")
	for i := 0; i < 5; i++ {
		readAfterStep(t, clk, cache, "a", clk.Now(), time.Minute)
		rt.noCall(t, "after a successful retry")
	}
}

// A pod whose inspection failed is retried until it is found gone; then
// the cache forgets it and the retries stop.
func TestEventedStopsRetryingAGonePod(t *testing.T) {
	rt := newScripted("a")
	_, stream, clk, cache := startScripted(t, rt)
	rt.set(func() { rt.failing["a"] = true })
	stream.send(t, "a")
	rt.nextCall(t, "for the event")
	waitFor(t, "the cache holds the inspection error", func() bool { _, err := cache.Get("a"); return err != nil })

	rt.set(func() {
		delete(rt.pods, "a")
		delete(rt.failing, "a")
	})
	clk.Step(time.Second)
	rt.nextCall(t, "for the retry")
	waitFor(t, "the cache forgets the gone pod", func() bool {
		st, err := cache.Get("a")
		return err == nil && len(st.ContainerStatuses)+len(st.SandboxStatuses) == 0
	})
	for i := 0; i < 5; i++ {
		readAfterStep(t, clk, cache, "a", clk.Now(), time.Minute)
		rt.noCall(t, "once it was gone")
	}
}

// A pod whose inspection took long (a pod of thousands of containers) is
// not inspected again for four times as long, however many events it
// sends meanwhile; then once.
func TestEventedHoldsBackAPodThatInspectsSlowly(t *testing.T) {
	rt := newScripted("a", "b")
	ev, stream, clk, cache := startScripted(t, rt)
	rt.set(func() { rt.took["a"] = time.Second })

	stream.send(t, "a")
	rt.nextCall(t, "for the first event")
	for i := 0; i < 100; i++ {
		stream.send(t, "a")
	}
	before, _ := cache.Get("b")
	stream.send(t, "b") // other pods are not held back
	if got := rt.nextCall(t, "for b"); got != "b" {
		t.Fatalf("inspected %s, want b", got)
	}
	before = settled(t, cache, "b", before)
	waitFor(t, "the queue is empty", func() bool { return len(ev.Queued()) == 0 })
	held := clk.Now()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 1; i <= 4; i++ {
		clk.Step(time.Second)
		if i < 4 {
			stream.send(t, "b") // the inspection of b comes after the tick
			if got := rt.nextCall(t, "for b"); got != "b" {
				t.Fatalf("%ds after a slow inspection: inspected %s, want b", i, got)
			}
			// b's inspection is over before the clock moves again.
			before = settled(t, cache, "b", before)
			rt.noCall(t, fmt.Sprintf("%ds after a slow inspection", i))
			// a's entry is stale: its readers wait for its inspection.
			if _, err := cache.GetNewerThan(done, "a", held); err == nil {
				t.Fatalf("%ds after a slow inspection: a status of a was served as current while a was held back", i)
			}
		}
	}
	if got := rt.nextCall(t, "4s after the slow inspection"); got != "a" {
		t.Fatalf("inspected %s, want a", got)
	}
	readAfterStep(t, clk, cache, "a", clk.Now(), time.Minute)
	rt.noCall(t, "once the held-back events were served")
}

// settled waits until the cache holds a status of uid other than prev
// (the inspection under way is over) and returns it.
func settled(t *testing.T, cache *pleg.Cache, uid types.UID, prev *runtime.PodStatus) *runtime.PodStatus {
	t.Helper()
	var st *runtime.PodStatus
	waitFor(t, "the inspection of "+string(uid)+" is recorded", func() bool {
		st, _ = cache.Get(uid)
		return st != prev
	})
	return st
}
