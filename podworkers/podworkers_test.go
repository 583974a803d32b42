package podworkers_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// call is one handler call.
type call struct {
	kind  string // sync, terminating, runtime, terminated
	uid   types.UID
	typ   podworkers.UpdateType
	grace int64
	image string // of the first container, to tell specs apart
}

// handler records calls on a channel; a call blocks while gate holds a
// token for it (block(uid)).
type handler struct {
	calls    chan call
	mu       sync.Mutex
	gates    map[types.UID]chan struct{}
	terminal map[types.UID]bool
	fail     map[string]int // kind → failures left
	panics   map[string]int // kind → panics left
}

func newHandler() *handler {
	return &handler{calls: make(chan call, 100), gates: map[types.UID]chan struct{}{}, terminal: map[types.UID]bool{}, fail: map[string]int{}, panics: map[string]int{}}
}

func (h *handler) block(uid types.UID) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := make(chan struct{})
	h.gates[uid] = g
	return g
}

func (h *handler) record(ctx context.Context, c call) error {
	h.mu.Lock()
	g := h.gates[c.uid]
	h.mu.Unlock()
	h.calls <- c
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.panics[c.kind] > 0 {
		h.panics[c.kind]--
		panic("injected " + c.kind + " panic")
	}
	if h.fail[c.kind] > 0 {
		h.fail[c.kind]--
		return errors.New("injected")
	}
	return nil
}

func image(pod *v1.Pod) string {
	if pod == nil || len(pod.Spec.Containers) == 0 {
		return ""
	}
	return pod.Spec.Containers[0].Image
}

func (h *handler) SyncPod(ctx context.Context, t podworkers.UpdateType, pod *v1.Pod, _ *runtime.PodStatus) (bool, error) {
	err := h.record(ctx, call{kind: "sync", uid: pod.UID, typ: t, image: image(pod)})
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.terminal[pod.UID], err
}

func (h *handler) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, _ *runtime.PodStatus, grace int64) error {
	return h.record(ctx, call{kind: "terminating", uid: pod.UID, grace: grace, image: image(pod)})
}

func (h *handler) SyncTerminatingRuntimePod(ctx context.Context, p *runtime.Pod) error {
	return h.record(ctx, call{kind: "runtime", uid: p.ID})
}

func (h *handler) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, _ *runtime.PodStatus) error {
	return h.record(ctx, call{kind: "terminated", uid: pod.UID})
}

type cache struct{}

func (cache) GetNewerThan(_ context.Context, uid types.UID, _ time.Time) (*runtime.PodStatus, error) {
	return &runtime.PodStatus{ID: uid}, nil
}

type env struct {
	t     *testing.T
	h     *handler
	pw    *podworkers.PodWorkers
	clock *clocktesting.FakeClock
}

func newEnv(t *testing.T) *env { return newEnvWithCache(t, cache{}) }

func newEnvWithCache(t *testing.T, c podworkers.StatusCache) *env {
	t.Helper()
	return newEnvWith(t, c, nil)
}

func newEnvWith(t *testing.T, c podworkers.StatusCache, reg prometheus.Registerer) *env {
	t.Helper()
	e := newStoppedEnv(t, c, reg)
	t.Cleanup(e.run())
	return e
}

// newStoppedEnv is an env whose PodWorkers does not run yet.
func newStoppedEnv(t *testing.T, c podworkers.StatusCache, reg prometheus.Registerer) *env {
	t.Helper()
	h := newHandler()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pw, err := podworkers.New(podworkers.Config{Handler: h, Cache: c, Clock: clk, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, h: h, pw: pw, clock: clk}
}

// run runs the PodWorkers until stop is called; stop returns once Run
// has.
func (e *env) run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.pw.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Error(err)
		}
	}
}

func (e *env) next() call {
	e.t.Helper()
	select {
	case c := <-e.h.calls:
		return c
	case <-time.After(10 * time.Second):
		e.t.Fatal("no handler call within 10s")
		return call{}
	}
}

// quiet checks that no call is pending, after letting workers run.
func (e *env) quiet() {
	e.t.Helper()
	for i := 0; i < 200; i++ {
		goschedHelper()
	}
	select {
	case c := <-e.h.calls:
		e.t.Fatalf("unexpected call %+v", c)
	default:
	}
}

// terminatingBlocked creates and syncs the pod, then kills it; it returns
// once SyncTerminatingPod runs, held until the returned gate closes.
func (e *env) terminatingBlocked(p *v1.Pod) chan struct{} {
	e.t.Helper()
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	e.next()
	gate := e.h.block(p.UID)
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p})
	if c := e.next(); c.kind != "terminating" {
		e.t.Fatalf("%+v, want terminating", c)
	}
	return gate
}

func pod(name, img string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](30), Containers: []v1.Container{{Name: "c", Image: img}}},
	}
}

func TestUpdatesCoalesceWhileASyncRuns(t *testing.T) {
	e := newEnv(t)
	p := pod("a", "v1")
	gate := e.h.block(p.UID)
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	if c := e.next(); c.kind != "sync" || c.typ != podworkers.SyncPodCreate {
		t.Fatalf("first call %+v", c)
	}
	for _, img := range []string{"v2", "v3", "v4"} {
		e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate, Pod: pod("a", img)})
	}
	gate <- struct{}{}
	if c := e.next(); c.kind != "sync" || c.image != "v4" || c.typ != podworkers.SyncPodUpdate {
		t.Errorf("after three updates during a sync: %+v, want one sync with v4", c)
	}
	close(gate)
	e.quiet()
}

func TestLifecycleAndNoRestart(t *testing.T) {
	e := newEnv(t)
	p := pod("a", "v1")
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	e.next()
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p})
	if c := e.next(); c.kind != "terminating" || c.grace != 30 {
		t.Fatalf("after kill: %+v, want terminating with the spec's 30s", c)
	}
	if c := e.next(); c.kind != "terminated" {
		t.Fatalf("then %+v, want terminated", c)
	}
	if !e.pw.IsPodTerminationRequested(p.UID) {
		t.Error("termination not recorded")
	}
	// The UID never syncs again.
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate, Pod: p})
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	e.quiet()
	waitFor(t, func() bool { return e.pw.ShouldPodContentBeRemoved(p.UID) })
}

func TestCreateAfterTerminationStartsAfreshOnceFinished(t *testing.T) {
	e := newEnv(t)
	p := pod("static", "v1")
	gate := e.terminatingBlocked(p)
	// The same UID is created again while it terminates.
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	if states := e.pw.SyncKnownPods([]*v1.Pod{p}); states[p.UID] != podworkers.Terminating {
		t.Fatalf("states %v: an unfinished worker must be kept", states)
	}
	close(gate)
	if c := e.next(); c.kind != "terminated" {
		t.Fatalf("%+v, want terminated: termination is never cut short", c)
	}
	e.quiet() // the create did not sync the terminating worker
	waitFor(t, func() bool { return e.pw.ShouldPodContentBeRemoved(p.UID) })
	if states := e.pw.SyncKnownPods([]*v1.Pod{p}); len(states) != 0 {
		t.Fatalf("states %v: the finished worker of a re-created UID must be forgotten", states)
	}
	e.h.mu.Lock()
	delete(e.h.gates, p.UID)
	e.h.mu.Unlock()
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	if c := e.next(); c.kind != "sync" || c.uid != p.UID {
		t.Fatalf("%+v, want the pod synced afresh", c)
	}
	if e.pw.IsPodTerminationRequested(p.UID) {
		t.Error("the new worker inherited the termination")
	}
}

// A shorter grace period cancels the kill in progress, which is
// retried at once with it, as the kubelet does; a longer one neither
// cancels nor lengthens it.
func TestShorterGracePeriodCancelsTheRunningKill(t *testing.T) {
	e := newEnv(t)
	p := pod("a", "v1")
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	e.next()
	gate := e.h.block(p.UID) // the kill hangs until its context ends
	defer close(gate)
	kill := func(grace int64) {
		e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p, Kill: &podworkers.KillPodOptions{GracePeriodOverride: &grace}})
	}
	kill(10)
	if c := e.next(); c.kind != "terminating" || c.grace != 10 {
		t.Fatalf("%+v, want terminating with 10s", c)
	}
	kill(60)
	kill(10)
	kill(5)
	if c := e.next(); c.kind != "terminating" || c.grace != 5 {
		t.Fatalf("%+v, want the kill with 10s cancelled and one with 5s at once", c)
	}
	e.h.mu.Lock()
	delete(e.h.gates, p.UID)
	e.h.mu.Unlock()
	kill(0)
	if c := e.next(); c.kind != "terminating" || c.grace != 0 {
		t.Fatalf("%+v, want the kill with 5s cancelled and one with 0s at once", c)
	}
	if c := e.next(); c.kind != "terminated" {
		t.Fatalf("%+v, want terminated", c)
	}
}

func TestTerminalPhaseTerminates(t *testing.T) {
	e := newEnv(t)
	p := pod("job", "v1")
	e.h.terminal[p.UID] = true
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	for _, want := range []string{"sync", "terminating", "terminated"} {
		if c := e.next(); c.kind != want {
			t.Fatalf("%+v, want %s", c, want)
		}
	}
}

func TestOrphanedRuntimePod(t *testing.T) {
	e := newEnv(t)
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, RunningPod: &runtime.Pod{ID: "orphan", Name: "x", Namespace: "ns"}})
	if c := e.next(); c.kind != "runtime" || c.uid != "orphan" {
		t.Fatalf("%+v, want the runtime pod terminated", c)
	}
	e.quiet()
}

// A pod known only to the runtime can only be killed: any other update
// for it creates no worker and runs nothing.
func TestOrphanUpdateOtherThanKillIsIgnored(t *testing.T) {
	e := newEnv(t)
	running := &runtime.Pod{ID: "orphan", Name: "x", Namespace: "ns"}
	for _, typ := range []podworkers.UpdateType{podworkers.SyncPodCreate, podworkers.SyncPodUpdate, podworkers.SyncPodSync} {
		e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: typ, RunningPod: running})
	}
	e.quiet()
	if _, known := e.pw.PodState(running.ID); known {
		t.Error("an orphan update other than a kill created a worker")
	}
}

func TestOneStaticPodPerName(t *testing.T) {
	e := newEnv(t)
	static := func(uid, img string) *v1.Pod {
		p := pod("web-node", img)
		p.UID = types.UID(uid)
		p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
		return p
	}
	old, replacement := static("old", "v1"), static("new", "v2")
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: old})
	e.next()
	gate := e.h.block(old.UID)
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: old})
	if c := e.next(); c.kind != "terminating" {
		t.Fatalf("%+v", c)
	}
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: replacement})
	e.quiet() // the replacement waits while the old pod terminates
	close(gate)
	seen := map[string]bool{}
	for i := 0; i < 2; i++ {
		c := e.next()
		seen[c.kind+" "+string(c.uid)] = true
	}
	if !seen["terminated old"] || !seen["sync new"] {
		t.Errorf("calls %v, want the old pod terminated and then the new one synced", seen)
	}
}

func TestSyncKnownPodsKillsOrphansOfTheConfig(t *testing.T) {
	e := newEnv(t)
	a, b := pod("a", "v1"), pod("b", "v1")
	for _, p := range []*v1.Pod{a, b} {
		e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
		e.next()
	}
	states := e.pw.SyncKnownPods([]*v1.Pod{a})
	// b's worker may already have terminated it by the time the states
	// are read; it must not be syncing.
	if s, ok := states[b.UID]; !ok || s == podworkers.Syncing {
		t.Errorf("b is %v (known %v), want terminating or terminated", s, ok)
	}
	for _, want := range []string{"terminating", "terminated"} {
		if c := e.next(); c.kind != want || c.uid != b.UID {
			t.Fatalf("%+v, want %s of b", c, want)
		}
	}
	waitFor(t, func() bool { return e.pw.ShouldPodContentBeRemoved(b.UID) })
	if states := e.pw.SyncKnownPods([]*v1.Pod{a}); len(states) != 1 {
		t.Errorf("states %v, want the finished b forgotten", states)
	}
}

func TestFailedSyncIsDueAfterBackOff(t *testing.T) {
	e := newEnv(t)
	p := pod("a", "v1")
	e.h.fail["sync"] = 1
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	e.next()
	// The failure is recorded after the handler returns; the clock stays
	// put, so whenever that happens the pod is due at now+10s and never
	// before.
	waitFor(t, func() bool {
		if due := e.pw.Due(e.clock.Now().Add(10*time.Second - time.Nanosecond)); len(due) != 0 {
			t.Fatalf("due before the back-off after a failure: %v", due)
		}
		return len(e.pw.Due(e.clock.Now().Add(10*time.Second))) == 1
	})
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
	if c := e.next(); c.kind != "sync" || c.typ != podworkers.SyncPodSync {
		t.Errorf("retry %+v", c)
	}
	// After a success the pod is due again after the resync interval,
	// counted from the end of the sync. The clock stays put, so whenever
	// the worker finishes, the pod is due at now+60s and never at now+59s.
	waitFor(t, func() bool {
		if due := e.pw.Due(e.clock.Now().Add(59 * time.Second)); len(due) != 0 {
			t.Fatalf("due before the resync interval: %v", due)
		}
		return len(e.pw.Due(e.clock.Now().Add(60*time.Second))) == 1
	})
}

func TestManyPods(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 50; i++ {
		e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod(fmt.Sprint("p", i), "v1")})
	}
	seen := map[types.UID]bool{}
	for i := 0; i < 50; i++ {
		seen[e.next().uid] = true
	}
	if len(seen) != 50 {
		t.Errorf("%d pods synced, want 50", len(seen))
	}
}

// waitFor yields until cond holds, failing after 10s of wall time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitForState(t, cond, func() string { return "condition not reached" })
}

// waitForState is waitFor that fails with describe's account of the state.
func waitForState(t *testing.T, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(describe())
		}
		goschedHelper()
	}
}

func TestTerminatingPodIsNeverSyncedAgain(t *testing.T) {
	e := newEnv(t)
	p := pod("a", "v1")
	gate := e.terminatingBlocked(p)
	// Spec updates and resyncs while it terminates change nothing.
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate, Pod: pod("a", "v2")})
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: pod("a", "v2")})
	close(gate)
	if c := e.next(); c.kind != "terminated" {
		t.Errorf("after updates during termination: %+v, want terminated and no sync", c)
	}
	e.quiet()
}

// Updates that keep arriving while Run shuts down start no worker after
// it stopped waiting for them, and do not race its wait (the race
// detector catches a worker added while Run waits).
func TestUpdatesDuringShutdown(t *testing.T) {
	h := newHandler()
	h.calls = make(chan call, 5000)
	for round := 0; round < 20; round++ {
		pw, err := podworkers.New(podworkers.Config{Handler: h, Cache: cache{}, Clock: clocktesting.NewFakeClock(time.Now())})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- pw.Run(ctx) }()
		fed := make(chan struct{})
		go func() {
			defer close(fed)
			for n := 0; n < 200; n++ {
				pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod(fmt.Sprint("r", round, "-", n), "img")})
			}
		}()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		<-fed
	}
}

// sinceCache records the times workers ask GetNewerThan for.
type sinceCache struct {
	mu    sync.Mutex
	since []time.Time
}

func (c *sinceCache) GetNewerThan(_ context.Context, uid types.UID, t time.Time) (*runtime.PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.since = append(c.since, t)
	return &runtime.PodStatus{ID: uid}, nil
}

// A sync waits for an observation that began after the previous sync
// ended: one that began while it ran may miss the container it started.
func TestSyncWaitsForAViewNewerThanThePreviousSyncsEnd(t *testing.T) {
	c := &sinceCache{}
	e := newEnvWithCache(t, c)
	t0 := e.clock.Now()
	p := pod("a", "v1")
	gate := e.h.block(p.UID)
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	e.next()                      // the first sync is under way...
	e.clock.Step(5 * time.Second) // ...and takes 5 s
	e.h.mu.Lock()
	delete(e.h.gates, p.UID)
	e.h.mu.Unlock()
	close(gate)
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
	e.next()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.since) != 2 || !c.since[1].Equal(t0.Add(5*time.Second)) {
		t.Errorf("GetNewerThan asked for %v, want the zero time, then %v (the first sync's end)", c.since, t0.Add(5*time.Second))
	}
}

// stepWhenWaiting advances the fake clock by d once a worker waits on it
// (a retry timer), failing after 10s of wall time.
func (e *env) stepWhenWaiting(d time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !e.clock.HasWaiters() {
		if time.Now().After(deadline) {
			e.t.Fatal("no worker waits on the clock for a retry")
		}
		goschedHelper()
	}
	e.clock.Step(d)
}

// A removed static pod whose kill fails once is retried by its worker
// after the back-off, with no update from the caller (which no longer has
// its spec); the replacement with the same name then starts.
func TestFailedKillIsRetriedAndTheReplacementStarts(t *testing.T) {
	e := newEnv(t)
	static := func(uid, img string) *v1.Pod {
		p := pod("web-node", img)
		p.UID = types.UID(uid)
		p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
		return p
	}
	old, replacement := static("old", "v1"), static("new", "v2")
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: old})
	e.next()
	e.h.mu.Lock()
	e.h.fail["terminating"] = 1
	e.h.mu.Unlock()
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: old})
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: replacement})
	if c := e.next(); c.kind != "terminating" || c.uid != old.UID {
		t.Fatalf("%+v, want the old pod's kill", c)
	}
	e.quiet() // the kill failed: nothing runs before the back-off
	if due := e.pw.Due(e.clock.Now().Add(time.Hour)); len(due) != 0 {
		t.Errorf("Due reports %v: a terminating pod is retried by its worker, not resynced", due)
	}
	e.stepWhenWaiting(10 * time.Second)
	for _, want := range []string{"terminating old", "terminated old", "sync new"} {
		if c := e.next(); c.kind+" "+string(c.uid) != want {
			t.Fatalf("%+v, want %s", c, want)
		}
	}
}

// failingCache fails the next fail reads.
type failingCache struct {
	mu   sync.Mutex
	fail int
}

func (c *failingCache) failNext(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = n
}

func (c *failingCache) GetNewerThan(_ context.Context, uid types.UID, _ time.Time) (*runtime.PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return nil, errors.New("injected cache failure")
	}
	return &runtime.PodStatus{ID: uid}, nil
}

// A failed status read is a failed step like any other: a syncing pod is
// due again after the back-off, and a terminating or terminated one is
// retried by its worker, with a back-off that doubles.
func TestFailedStatusReadIsRetried(t *testing.T) {
	c := &failingCache{}
	e := newEnvWithCache(t, c)
	p := pod("a", "v1")
	c.failNext(1)
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	// The clock stands still: the failed step ended now.
	waitFor(t, func() bool { return len(e.pw.Due(e.clock.Now().Add(10*time.Second))) == 1 })
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
	if c := e.next(); c.kind != "sync" {
		t.Fatalf("%+v, want the sync retried", c)
	}

	// Terminating: two failed reads, each retried after 10 s.
	c.failNext(2)
	gate := e.h.block(p.UID)
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p})
	e.stepWhenWaiting(10 * time.Second)
	e.stepWhenWaiting(10 * time.Second)
	if c := e.next(); c.kind != "terminating" {
		t.Fatalf("%+v, want terminating", c)
	}
	// Terminated: one failed read, then the back-off starts again at 10 s.
	c.failNext(1)
	close(gate)
	e.stepWhenWaiting(10 * time.Second)
	if c := e.next(); c.kind != "terminated" {
		t.Fatalf("%+v, want terminated", c)
	}
	waitFor(t, func() bool { return e.pw.ShouldPodContentBeRemoved(p.UID) })
}

// A kill cancels the SyncPod in progress, so that a sync stuck in a pull
// or a hook cannot hold up termination.
func TestKillCancelsTheRunningSync(t *testing.T) {
	e := newEnv(t)
	p := pod("a", "v1")
	gate := e.h.block(p.UID) // SyncPod hangs until its context ends
	defer close(gate)
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	if c := e.next(); c.kind != "sync" {
		t.Fatalf("%+v, want sync", c)
	}
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p})
	if c := e.next(); c.kind != "terminating" {
		t.Fatalf("%+v, want the hung sync cancelled and the pod terminating", c)
	}
}

// panicsCounted returns nodekit_podworkers_sync_panics_total.
func panicsCounted(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "nodekit_podworkers_sync_panics_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("nodekit_podworkers_sync_panics_total is not registered")
	return 0
}

// A panic in the handler is recovered in the pod's goroutine, counted,
// and treated as a failed step: the sync is due again after the
// back-off, a terminating step is retried by the worker.
func TestHandlerPanicIsAFailedStep(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, cache{}, reg)
	p := pod("a", "v1")
	e.h.mu.Lock()
	e.h.panics["sync"], e.h.panics["terminating"] = 1, 1
	e.h.mu.Unlock()
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	e.next()
	waitFor(t, func() bool { return len(e.pw.Due(e.clock.Now().Add(10*time.Second))) == 1 })
	if n := panicsCounted(t, reg); n != 1 {
		t.Errorf("%v panics counted, want 1", n)
	}
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
	if c := e.next(); c.kind != "sync" {
		t.Fatalf("%+v, want the sync retried", c)
	}
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p})
	if c := e.next(); c.kind != "terminating" {
		t.Fatalf("%+v, want terminating", c)
	}
	e.stepWhenWaiting(10 * time.Second)
	for _, want := range []string{"terminating", "terminated"} {
		if c := e.next(); c.kind != want {
			t.Fatalf("%+v, want %s", c, want)
		}
	}
	if n := panicsCounted(t, reg); n != 2 {
		t.Errorf("%v panics counted, want 2", n)
	}
}

// dueChanged expects a value on DueChanged within 10s.
func (e *env) dueChanged(why string) {
	e.t.Helper()
	select {
	case <-e.pw.DueChanged():
	case <-time.After(10 * time.Second):
		e.t.Fatalf("DueChanged did not receive within 10s after %s", why)
	}
}

func (e *env) nextDue(want time.Duration) {
	e.t.Helper()
	if at, ok := e.pw.NextDue(); !ok || !at.Equal(e.clock.Now().Add(want)) {
		e.t.Fatalf("NextDue %v %v, want %v from now", at, ok, want)
	}
}

// DueChanged tells a sleeping sync loop of a due time earlier than
// NextDue last returned, and only of those.
func TestDueChangedSignalsOnlyEarlierDueTimes(t *testing.T) {
	e := newEnv(t)
	if _, ok := e.pw.NextDue(); ok {
		t.Fatal("due with no pod")
	}
	a, b, c := pod("a", "v1"), pod("b", "v1"), pod("c", "v1")
	// NextDue said none: the first resync is news.
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: a})
	e.next()
	e.dueChanged("the first sync finished")
	e.nextDue(time.Minute)
	// A failed sync is retried after 10s, before the resync: news.
	e.h.fail["sync"] = 1
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: b})
	e.next()
	e.dueChanged("a failed sync")
	e.nextDue(10 * time.Second)
	// A resync a minute away is not: c's second step starts only once
	// its first finished, and the clock stays put.
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: c})
	e.next()
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: c})
	e.next()
	select {
	case <-e.pw.DueChanged():
		t.Error("DueChanged received for a resync later than NextDue's 10s")
	default:
	}
	// SyncBy before the earliest due time is news at once.
	e.pw.SyncBy(c.UID, e.clock.Now().Add(5*time.Second))
	e.dueChanged("SyncBy")
	e.nextDue(5 * time.Second)
	e.pw.SyncBy(c.UID, e.clock.Now().Add(7*time.Second))
	select {
	case <-e.pw.DueChanged():
		t.Error("DueChanged received for a request later than NextDue's 5s")
	default:
	}
}

// TestIdleWorkersHoldNoGoroutine: a pod's goroutine exists only while the
// pod has a step to take; a synced pod holds none, and its next update
// starts one again.
func TestIdleWorkersHoldNoGoroutine(t *testing.T) {
	e := newEnv(t)
	base := goruntime.NumGoroutine()
	const n = 100
	for round, img := range []string{"v1", "v2"} {
		typ := podworkers.SyncPodCreate
		if round > 0 {
			typ = podworkers.SyncPodUpdate
		}
		for i := range n {
			e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: typ, Pod: pod(fmt.Sprint("p", i), img)})
		}
		seen := map[types.UID]bool{}
		for range n {
			c := e.next()
			if c.image != img {
				t.Fatalf("round %d: %+v, want a sync of %s", round, c, img)
			}
			seen[c.uid] = true
		}
		if len(seen) != n {
			t.Fatalf("round %d: %d pods synced, want %d", round, len(seen), n)
		}
		waitForState(t, func() bool { return goruntime.NumGoroutine() <= base },
			func() string {
				return fmt.Sprintf("%d goroutines with every pod synced, want at most %d", goruntime.NumGoroutine(), base)
			})
	}
	e.quiet()
}

// TestUpdatesRacingTheGoroutinesEndAreNeverLost: updates sent from many
// goroutines while pods' goroutines come and go; each pod's last sync
// sees its last spec.
func TestUpdatesRacingTheGoroutinesEndAreNeverLost(t *testing.T) {
	e := newEnv(t)
	const pods, updates = 20, 50
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			for u := range updates {
				typ := podworkers.SyncPodUpdate
				if u == 0 {
					typ = podworkers.SyncPodCreate
				}
				e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: typ, Pod: pod(fmt.Sprint("p", i), fmt.Sprint("v", u))})
				if u%7 == 0 {
					goschedHelper()
				}
			}
		})
	}
	last := map[types.UID]string{}
	want := fmt.Sprint("v", updates-1)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	sent := false
	deadline := time.After(20 * time.Second)
	for {
		finished := sent && len(last) == pods
		for _, img := range last {
			finished = finished && img == want
		}
		if finished {
			e.quiet()
			return
		}
		select {
		case c := <-e.h.calls:
			last[c.uid] = c.image
		case <-done:
			sent, done = true, nil // keep reading calls
		case <-deadline:
			t.Fatalf("after 20s the last syncs seen are %v, want %s for each of %d pods", last, want, pods)
		}
	}
}

// TestCouldHaveRunningContainers checks the kubelet's rule: a pod may run
// containers until its terminating step has succeeded; a pod without a
// worker may until SyncKnownPods has run, and not after.
func TestCouldHaveRunningContainers(t *testing.T) {
	e := newEnv(t)
	unknown := types.UID("uid-unknown")
	if !e.pw.CouldHaveRunningContainers(unknown) {
		t.Error("a pod without a worker before SyncKnownPods: false, want true")
	}
	p := pod("a", "v1")
	e.pw.SyncKnownPods([]*v1.Pod{p})
	if e.pw.CouldHaveRunningContainers(unknown) {
		t.Error("a pod without a worker after SyncKnownPods: true, want false")
	}
	gate := e.terminatingBlocked(p)
	if !e.pw.CouldHaveRunningContainers(p.UID) {
		t.Error("a pod whose terminating step runs: false, want true")
	}
	gate <- struct{}{}
	if c := e.next(); c.kind != "terminated" {
		t.Fatalf("%+v, want terminated", c)
	}
	if e.pw.CouldHaveRunningContainers(p.UID) {
		t.Error("a pod whose terminating step succeeded: true, want false")
	}
	close(gate)
	e.quiet()
}

// A pod's update pending when Run's context ends is taken by the next
// Run: the worker that stops leaves it pending instead of taking the step
// and dropping it.
func TestPendingUpdateOutlivesRun(t *testing.T) {
	e := newStoppedEnv(t, cache{}, nil)
	h, pw := e.h, e.pw
	stop := e.run()
	p := pod("a", "v1")
	gate := h.block(p.UID) // the sync hangs until Run's context ends
	pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	if c := e.next(); c.kind != "sync" || c.image != "v1" {
		t.Fatalf("%+v, want the sync of v1", c)
	}
	pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate, Pod: pod("a", "v2")})
	stop()
	close(gate)

	stop = e.run()
	defer stop()
	if c := e.next(); c.kind != "sync" || c.image != "v2" {
		t.Fatalf("%+v, want the update to v2 synced by the next Run", c)
	}
}
