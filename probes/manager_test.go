package probes_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/probes"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// world is a scripted pod status and prober.
type world struct {
	mu      sync.Mutex
	status  v1.PodStatus
	results []probes.Result // consumed one per probe; then the last repeats
	calls   int
	panics  int // the next probes that panic
	errs    int // the next probes that cannot run (an error)
	events  []string
}

func (w *world) getStatus(types.UID) (v1.PodStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return *w.status.DeepCopy(), true
}

func (w *world) probe(_ context.Context, _ probes.Target, _ *v1.Probe, _ time.Duration) (probes.Result, string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.panics > 0 {
		w.panics--
		panic("scripted prober panic")
	}
	if w.errs > 0 {
		w.errs--
		return probes.Failure, "", errors.New("scripted prober error")
	}
	r := w.results[0]
	if len(w.results) > 1 {
		w.results = w.results[1:]
	}
	return r, "scripted " + r.String(), nil
}

func (w *world) running(id string, started time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", ContainerID: id, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}
}

func (w *world) script(r ...probes.Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.results = r
}

type env struct {
	t     *testing.T
	w     *world
	m     *probes.Manager
	clock *clocktesting.FakeClock
	reg   *prometheus.Registry
}

func newEnv(t *testing.T) *env {
	t.Helper()
	w := &world{results: []probes.Result{probes.Success}}
	clk := clocktesting.NewFakeClock(t0)
	reg := prometheus.NewRegistry()
	m, err := probes.New(probes.Config{
		Prober: probes.ProberFunc(w.probe), Status: w.getStatus, Clock: clk, Registerer: reg,
		Jitter: func(time.Duration) time.Duration { return 0 },
		Events: func(_ *v1.Pod, _, reason, msg string) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.events = append(w.events, reason+": "+msg)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &env{t: t, w: w, m: m, clock: clk, reg: reg}
}

func pod(probesFor map[probes.Type]*v1.Probe) *v1.Pod {
	c := v1.Container{Name: "c", LivenessProbe: probesFor[probes.Liveness], ReadinessProbe: probesFor[probes.Readiness], StartupProbe: probesFor[probes.Startup]}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
}

func probe(period, failure, success, delay int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}},
		PeriodSeconds: period, FailureThreshold: failure, SuccessThreshold: success, InitialDelaySeconds: delay, TimeoutSeconds: 1}
}

// next returns the next update, stepping the clock a period at a time.
func (e *env) next(period time.Duration) probes.Update {
	e.t.Helper()
	for i := 0; i < 100; i++ {
		select {
		case u := <-e.m.Updates():
			return u
		default:
		}
		e.settle()
		select {
		case u := <-e.m.Updates():
			return u
		default:
		}
		e.clock.Step(period)
	}
	e.t.Fatal("no update after 100 periods")
	return probes.Update{}
}

// settle returns once every worker is idle: a worker arms its clock timer
// only after its probe returned, so idle workers are the clock's waiters.
// The wait is bounded; a worker that never goes idle fails the test.
func (e *env) settle() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.clock.Waiters() < e.m.Workers() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%d of %d probe workers idle after 10s", e.clock.Waiters(), e.m.Workers())
		}
		goruntime.Gosched()
	}
}

func (e *env) calls() int {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	return e.w.calls
}

func TestInitialResults(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Success)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(10, 3, 1, 0)}))
	if u := e.next(10 * time.Second); u.Type != probes.Readiness || u.Result != probes.Failure || u.ContainerID != "fake://a" {
		t.Fatalf("first update %+v, want readiness failure before the first probe", u)
	}
	if u := e.next(10 * time.Second); u.Result != probes.Success {
		t.Fatalf("after a successful probe: %+v", u)
	}
	if e.m.Readiness("fake://a") != probes.Success {
		t.Error("Readiness() disagrees with the update")
	}
}

func TestFailureThresholdAndHoldUntilRestart(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Failure)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Liveness: probe(10, 3, 1, 0)}))
	if u := e.next(10 * time.Second); u.Result != probes.Success {
		t.Fatalf("liveness starts as %v, want success", u.Result)
	}
	u := e.next(10 * time.Second)
	if u.Result != probes.Failure || e.calls() != 3 {
		t.Fatalf("liveness failed after %d probes (%+v), want after 3", e.calls(), u)
	}
	// Held: no more probes until the container restarts.
	held := e.calls()
	for i := 0; i < 5; i++ {
		e.clock.Step(10 * time.Second)
		e.settle()
	}
	if e.calls() != held {
		t.Errorf("%d probes while held, want 0", e.calls()-held)
	}
	e.w.script(probes.Success)
	e.w.running("fake://b", t0.Add(time.Minute))
	if u := e.next(10 * time.Second); u.ContainerID != "fake://b" || u.Result != probes.Success {
		t.Errorf("after the restart: %+v, want success for the new container", u)
	}
	if got := e.m.Liveness("fake://a"); got != probes.Unknown {
		t.Errorf("the old container's result %v is still kept", got)
	}
	e.w.mu.Lock()
	events := strings.Join(e.w.events, "\n")
	e.w.mu.Unlock()
	if !strings.Contains(events, "Unhealthy: container c: Liveness probe failed: scripted failure") {
		t.Errorf("events %q", events)
	}
	if got := testutil.ToFloat64(counterOf(t, e.reg, "failed")); got != 3 {
		t.Errorf("prober_probe_total failed = %v, want 3", got)
	}
}

func counterOf(t *testing.T, reg *prometheus.Registry, result string) prometheus.Collector {
	t.Helper()
	mfs, _ := reg.Gather()
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "prober_probe_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return sum })
}

func TestSuccessThreshold(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Success)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(5, 3, 2, 0)}))
	e.next(5 * time.Second) // initial failure
	if u := e.next(5 * time.Second); u.Result != probes.Success || e.calls() != 2 {
		t.Errorf("ready after %d successes, want 2", e.calls())
	}
}

func TestInitialDelay(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(10, 3, 1, 30)}))
	e.next(10 * time.Second) // initial failure
	for e.clock.Since(t0) < 20*time.Second {
		e.clock.Step(10 * time.Second)
		e.settle()
	}
	if c := e.calls(); c != 0 {
		t.Errorf("%d probes within the 30s initial delay (at %v)", c, e.clock.Since(t0))
	}
	e.next(10 * time.Second)
	if e.calls() == 0 {
		t.Error("no probe after the initial delay")
	}
}

func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Failure, probes.Success, probes.Success)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{
		probes.Startup:   probe(10, 30, 1, 0),
		probes.Readiness: probe(10, 3, 1, 0),
	}))
	seen := map[probes.Type][]probes.Result{}
	for len(seen[probes.Readiness]) < 2 {
		u := e.next(10 * time.Second)
		seen[u.Type] = append(seen[u.Type], u.Result)
		if u.Type == probes.Readiness && u.Result == probes.Success && e.m.Startup("fake://a") != probes.Success {
			t.Fatal("readiness passed before startup")
		}
	}
	if got := seen[probes.Startup]; len(got) < 1 || got[len(got)-1] != probes.Success {
		t.Errorf("startup results %v", got)
	}
}

func TestNotRunningIsFailureAndRemovePodStopsWorkers(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	p := pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(10, 3, 1, 0), probes.Liveness: probe(10, 3, 1, 0)})
	e.m.AddPod(p)
	e.m.AddPod(p) // idempotent
	if n := e.m.Workers(); n != 2 {
		t.Fatalf("%d workers, want 2 (one per probe)", n)
	}
	e.m.RemovePod(p.UID)
	if n := e.m.Workers(); n != 0 {
		t.Errorf("%d workers after RemovePod", n)
	}
}

func TestFirstProbesAreSpreadOverThePeriod(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	var mu sync.Mutex
	firsts := map[types.UID]time.Time{}
	statusOf := func(uid types.UID) (v1.PodStatus, bool) {
		return v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "c", ContainerID: "fake://" + string(uid),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}}}}, true
	}
	m, err := probes.New(probes.Config{Status: statusOf, Clock: clk, // default Jitter
		Prober: probes.ProberFunc(func(_ context.Context, tg probes.Target, _ *v1.Probe, _ time.Duration) (probes.Result, string, error) {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := firsts[tg.Pod.UID]; !ok {
				firsts[tg.Pod.UID] = clk.Now()
			}
			return probes.Success, "", nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	go func() {
		for {
			select {
			case <-m.Updates():
			case <-ctx.Done():
				return
			}
		}
	}()
	const n = 100
	for i := 0; i < n; i++ {
		p := pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(10, 3, 1, 0)})
		p.UID = types.UID(fmt.Sprint("uid-", i))
		m.AddPod(p)
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(firsts) }
	deadline := time.Now().Add(10 * time.Second)
	for step := 0; count() < n && step < 20; step++ {
		for clk.Waiters() < n { // every worker idle on its timer
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d probe workers idle after 10s", clk.Waiters(), n)
			}
			goruntime.Gosched()
		}
		clk.Step(time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	seconds := map[time.Duration]bool{}
	for _, at := range firsts {
		seconds[at.Sub(t0).Truncate(time.Second)] = true
	}
	if len(firsts) != n || len(seconds) < 5 {
		t.Errorf("%d first probes at %d distinct seconds, want all %d spread over the 10 s period", len(firsts), len(seconds), n)
	}
}

func TestStartupIsUnknownUntilItsThreshold(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Failure)
	// A threshold of 10 leaves room for a worker that probes once more
	// than the loop below asks before it looks.
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Startup: probe(10, 10, 1, 0), probes.Liveness: probe(10, 3, 1, 0)}))
	for e.calls() < 2 {
		e.clock.Step(10 * time.Second)
		e.settle()
	}
	calls := e.calls()
	if got := e.m.Startup("fake://a"); calls < 10 && got != probes.Unknown {
		t.Errorf("startup after %d of 10 failures: %v, want Unknown", calls, got)
	}
}

// A Prober that panics ends that round without a result; the worker, and
// the manager, go on.
func TestPanickingProberDoesNotStopTheWorker(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.mu.Lock()
	e.w.panics = 2
	e.w.mu.Unlock()
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(10, 3, 1, 0)}))
	if u := e.next(10 * time.Second); u.Result != probes.Failure {
		t.Fatalf("first update %+v, want the initial failure", u)
	}
	if u := e.next(10 * time.Second); u.Result != probes.Success || e.calls() != 3 {
		t.Fatalf("%+v after %d probes, want success on the third, after two panics", u, e.calls())
	}
	want := "# HELP nodekit_prober_panics_total Panics recovered from the Prober; each ends its round without a result.\n# TYPE nodekit_prober_panics_total counter\nnodekit_prober_panics_total 2\n"
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "nodekit_prober_panics_total"); err != nil {
		t.Error(err)
	}
}

func TestWarningCountsAsSuccessWithAProbeWarningEvent(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Warning)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Liveness: probe(10, 1, 1, 0)}))
	if u := e.next(10 * time.Second); u.Result != probes.Success {
		t.Fatalf("liveness starts as %v, want success", u.Result)
	}
	for i := 0; i < 3; i++ {
		e.clock.Step(10 * time.Second)
		e.settle()
	}
	if got := e.m.Liveness("fake://a"); got != probes.Success {
		t.Errorf("liveness after %d warnings: %v, want success (no restart)", e.calls(), got)
	}
	e.w.mu.Lock()
	events := strings.Join(e.w.events, "\n")
	e.w.mu.Unlock()
	if !strings.Contains(events, "ProbeWarning: container c: Liveness probe warning: scripted warning") {
		t.Errorf("events %q, want a ProbeWarning with the probe's output", events)
	}
	if strings.Contains(events, "Unhealthy") {
		t.Errorf("events %q: a warning is not a failure", events)
	}
	if got := testutil.ToFloat64(counterOf(t, e.reg, "successful")); got < 3 {
		t.Errorf("prober_probe_total successful = %v, want the warnings counted", got)
	}
}

func TestSidecarReadinessWaitsForItsInitialDelay(t *testing.T) {
	e := newEnv(t)
	always := v1.ContainerRestartPolicyAlways
	run := func(started time.Time) v1.ContainerState {
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}
	}
	e.w.mu.Lock()
	e.w.status = v1.PodStatus{Phase: v1.PodRunning,
		InitContainerStatuses: []v1.ContainerStatus{{Name: "c", ContainerID: "fake://s", State: run(t0)}},
		ContainerStatuses:     []v1.ContainerStatus{{Name: "app", ContainerID: "fake://a", State: run(t0)}},
	}
	e.w.mu.Unlock()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "c", RestartPolicy: &always, ReadinessProbe: probe(1, 3, 1, 15)}},
		Containers:     []v1.Container{{Name: "app"}},
	}}
	e.m.AddPod(p)
	if u := e.next(time.Second); u.ContainerID != "fake://s" || u.Result != probes.Failure {
		t.Fatalf("first update %+v, want the sidecar's initial readiness failure", u)
	}
	for e.clock.Since(t0) < 14*time.Second {
		e.clock.Step(time.Second)
		e.settle()
	}
	if c := e.calls(); c != 0 || e.m.Readiness("fake://s") != probes.Failure {
		t.Errorf("%d probes, readiness %v at %v, within the 15s initial delay", c, e.m.Readiness("fake://s"), e.clock.Since(t0))
	}
	u := e.next(time.Second)
	if u.Result != probes.Success || e.clock.Since(t0) < 15*time.Second {
		t.Errorf("update %+v at %v, want readiness success at 15s or later", u, e.clock.Since(t0))
	}
}

// Trigger runs the probe at once, as the kubelet's manual trigger does,
// and leaves the period's grid where it was.
func TestTriggerProbesAtOnceAndKeepsTheGrid(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Success)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(30, 1, 1, 0)}))
	e.next(30 * time.Second) // the initial failure
	if u := e.next(30 * time.Second); u.Result != probes.Success || e.clock.Since(t0) != 0 {
		t.Fatalf("%+v at %v, want success at once", u, e.clock.Since(t0))
	}
	e.settle()
	e.w.script(probes.Failure)
	if !e.m.Trigger("uid", "c", probes.Readiness) {
		t.Fatal("Trigger found no readiness worker")
	}
	select {
	case u := <-e.m.Updates():
		if u.Result != probes.Failure || e.calls() != 2 || e.clock.Since(t0) != 0 {
			t.Errorf("%+v after %d probes at %v, want a failure from a second probe with the clock unmoved", u, e.calls(), e.clock.Since(t0))
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no probe 10s after Trigger (%d probes)", e.calls())
	}
	e.settle()
	e.clock.Step(29 * time.Second)
	e.settle()
	if c := e.calls(); c != 2 {
		t.Errorf("%d probes 29s into the period, want 2: the trigger moved the grid", c)
	}
	e.clock.Step(time.Second)
	e.settle()
	deadline := time.Now().Add(10 * time.Second)
	for e.calls() != 3 && time.Now().Before(deadline) {
		goruntime.Gosched()
	}
	if c := e.calls(); c != 3 {
		t.Errorf("%d probes at the period's end, want 3", c)
	}
	for _, tc := range []struct {
		container string
		typ       probes.Type
	}{{"other", probes.Readiness}, {"c", probes.Liveness}} {
		if e.m.Trigger("uid", tc.container, tc.typ) {
			t.Errorf("Trigger(%s, %s) was taken by a worker that does not exist", tc.container, tc.typ)
		}
	}
}
