package syncloop_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/probes"
	"github.com/nodekit/nodekit/syncloop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder records every dispatch as "method:pod,pod" and signals each.
type recorder struct {
	mu       sync.Mutex
	calls    []string
	cleanErr error
	seen     chan string
}

func (r *recorder) record(method string, pods []*v1.Pod) {
	s := method
	for i, p := range pods {
		if i == 0 {
			s += ":"
		} else {
			s += ","
		}
		s += p.Name
	}
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
	r.seen <- s
}

func (r *recorder) HandlePodAdditions(_ context.Context, p []*v1.Pod) { r.record("add", p) }
func (r *recorder) HandlePodUpdates(_ context.Context, p []*v1.Pod)   { r.record("update", p) }
func (r *recorder) HandlePodRemoves(_ context.Context, p []*v1.Pod)   { r.record("remove", p) }
func (r *recorder) HandlePodReconcile(_ context.Context, p []*v1.Pod) { r.record("reconcile", p) }
func (r *recorder) HandlePodSyncs(_ context.Context, p []*v1.Pod)     { r.record("sync", p) }
func (r *recorder) HandlePodCleanups(context.Context) error {
	r.record("cleanup", nil)
	return r.cleanErr
}
func (r *recorder) HandleProbeUpdate(_ context.Context, u probes.Update) {
	r.record(fmt.Sprintf("probe %s %s", u.Type, u.Result), nil)
}

type env struct {
	t       *testing.T
	rec     *recorder
	clk     *clocktesting.FakeClock
	updates chan podsource.Update
	events  chan *pleg.Event
	probes  chan probes.Update
	due     chan []types.UID
	done    chan error
}

var known = map[types.UID]*v1.Pod{
	"uid-a": {ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"}},
	"uid-b": {ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "uid-b"}},
}

func start(t *testing.T, cleanErr error) *env {
	t.Helper()
	return startWith(t, cleanErr, nil)
}

// startWith starts a loop whose Config change edits, if set.
func startWith(t *testing.T, cleanErr error, change func(*syncloop.Config)) *env {
	t.Helper()
	e := &env{
		t:       t,
		rec:     &recorder{seen: make(chan string, 100), cleanErr: cleanErr},
		clk:     clocktesting.NewFakeClock(time.Unix(1000, 0)),
		updates: make(chan podsource.Update),
		events:  make(chan *pleg.Event),
		probes:  make(chan probes.Update),
		due:     make(chan []types.UID, 1),
		done:    make(chan error, 1),
	}
	cfg := syncloop.Config{
		Handler: e.rec, Updates: e.updates, Events: e.events, ProbeUpdates: e.probes,
		Due: func(time.Time) []types.UID {
			select {
			case uids := <-e.due:
				return uids
			default:
				return nil
			}
		},
		Lookup: func(uid types.UID) (*v1.Pod, bool) { p, ok := known[uid]; return p, ok },
		Clock:  e.clk,
	}
	if change != nil {
		change(&cfg)
	}
	loop, err := syncloop.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { e.done <- loop.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of its context ending")
		}
	})
	return e
}

// next returns the next dispatch, failing after 10s.
func (e *env) next() string {
	e.t.Helper()
	select {
	case s := <-e.rec.seen:
		return s
	case <-time.After(10 * time.Second):
		e.t.Fatalf("no dispatch within 10s; so far: %q", e.rec.calls)
		return ""
	}
}

// quiet checks that nothing more was dispatched once the loop has taken
// one more input (an ADD of pod b), so nothing is pending.
func (e *env) quiet() {
	e.t.Helper()
	e.updates <- podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{known["uid-b"]}}
	if got := e.next(); got != "add:b" {
		e.t.Errorf("dispatched %q, want nothing before the marker", got)
	}
}

func TestSourceUpdatesAreDispatchedByOp(t *testing.T) {
	e := start(t, nil)
	a := []*v1.Pod{known["uid-a"]}
	for _, tc := range []struct {
		op   podsource.Op
		want string
	}{
		{podsource.ADD, "add:a"},
		{podsource.UPDATE, "update:a"},
		{podsource.DELETE, "update:a"},
		{podsource.REMOVE, "remove:a"},
		{podsource.RECONCILE, "reconcile:a"},
	} {
		e.updates <- podsource.Update{Op: tc.op, Pods: a}
		if got := e.next(); got != tc.want {
			t.Errorf("op %v: dispatched %q, want %q", tc.op, got, tc.want)
		}
	}
	e.quiet()
}

func TestPLEGEventsSyncKnownPodsOnly(t *testing.T) {
	e := start(t, nil)
	e.events <- &pleg.Event{ID: "uid-a", Type: pleg.ContainerStarted}
	if got := e.next(); got != "sync:a" {
		t.Errorf("ContainerStarted: dispatched %q, want sync:a", got)
	}
	e.events <- &pleg.Event{ID: "uid-a", Type: pleg.ContainerRemoved}
	e.events <- &pleg.Event{ID: "uid-unknown", Type: pleg.ContainerStarted}
	e.quiet()
}

// As the kubelet's handleProbeSync: every readiness and startup change
// and every liveness failure syncs the pod at once; a liveness success
// does not.
func TestProbeChangesSyncAtOnce(t *testing.T) {
	e := start(t, nil)
	for _, tc := range []struct {
		typ    probes.Type
		result probes.Result
		want   []string
	}{
		{probes.Readiness, probes.Failure, []string{"probe Readiness failure", "sync:a"}},
		{probes.Readiness, probes.Success, []string{"probe Readiness success", "sync:a"}},
		{probes.Liveness, probes.Success, []string{"probe Liveness success"}},
		{probes.Liveness, probes.Failure, []string{"probe Liveness failure", "sync:a"}},
		{probes.Startup, probes.Failure, []string{"probe Startup failure", "sync:a"}},
		{probes.Startup, probes.Success, []string{"probe Startup success", "sync:a"}},
	} {
		e.probes <- probes.Update{PodUID: "uid-a", Type: tc.typ, Result: tc.result}
		var got []string
		for range tc.want {
			got = append(got, e.next())
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.typ, tc.result, diff)
		}
	}
	e.quiet()
}

func TestDuePodsAreSyncedOnTheSyncTick(t *testing.T) {
	e := start(t, nil)
	e.due <- []types.UID{"uid-a", "uid-gone", "uid-b"}
	waitForTickers(t, e.clk)
	e.clk.Step(time.Second)
	if got := e.next(); got != "sync:a,b" {
		t.Errorf("dispatched %q, want sync:a,b (the unknown UID left out)", got)
	}
	e.quiet()
}

func TestHousekeepingGoesOnAfterAnError(t *testing.T) {
	e := start(t, errors.New("boom"))
	waitForTickers(t, e.clk)
	cleanupEvery2s(t, e, 3)
}

// cleanupEvery2s steps the clock 2 s at a time, rounds times, and checks
// that each step dispatches a housekeeping pass (the sync tick fires too,
// with nothing due).
func cleanupEvery2s(t *testing.T, e *env, rounds int) {
	t.Helper()
	for i := range rounds {
		e.clk.Step(2 * time.Second)
		if got := e.next(); got != "cleanup" {
			t.Fatalf("round %d: dispatched %q, want cleanup", i, got)
		}
	}
}

func TestClosedInputsStopNothingButThemselves(t *testing.T) {
	e := start(t, nil)
	close(e.events)
	close(e.probes)
	// A closed optional input is dropped: the loop keeps serving the rest
	// instead of spinning on it.
	e.updates <- podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{known["uid-a"]}}
	if got := e.next(); got != "add:a" {
		t.Errorf("dispatched %q, want add:a", got)
	}
	e.quiet()
	// The source stream closing ends the loop with an error.
	close(e.updates)
	select {
	case err := <-e.done:
		if err == nil {
			t.Error("Run returned nil after the update stream closed, want an error")
		}
		e.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the update stream closed")
	}
}

// waitForTickers waits until the loop's two tickers exist on the clock.
func waitForTickers(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the loop's tickers were not created within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
