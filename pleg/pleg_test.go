package pleg_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// counting wraps a runtime to count detailed inspections, which fail
// while failing is set.
type counting struct {
	runtime.Runtime
	inspections atomic.Int32
	failing     atomic.Bool
	// failList makes the lists fail.
	failList atomic.Bool
	// panicList and panicking make the lists and the inspections panic.
	panicList, panicking atomic.Bool
}

func (c *counting) GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error) {
	if c.panicList.Load() {
		panic("list exploded")
	}
	if c.failList.Load() {
		return nil, fmt.Errorf("listing: %w", runtime.ErrUnavailable)
	}
	return c.Runtime.GetPods(ctx, all)
}

func (c *counting) GetPodStatus(ctx context.Context, uid types.UID, name, ns string) (*runtime.PodStatus, error) {
	c.inspections.Add(1)
	if c.panicking.Load() {
		panic("inspection exploded")
	}
	if c.failing.Load() {
		return nil, fmt.Errorf("inspecting %s: %w", uid, runtime.ErrUnavailable)
	}
	return c.Runtime.GetPodStatus(ctx, uid, name, ns)
}

// lending is a counting runtime with runtime.PodVisitor, lending each
// pod as that interface allows and no longer: a copy of what the inner
// runtime (runtime/cri) lends, overwritten once fn returns, so that a
// relist that kept any of it would see other pods and states.
type lending struct{ *counting }

func (l lending) VisitPods(ctx context.Context, all bool, fn func(*runtime.Pod)) error {
	if l.panicList.Load() {
		panic("list exploded")
	}
	if l.failList.Load() {
		return fmt.Errorf("listing: %w", runtime.ErrUnavailable)
	}
	return l.Runtime.(runtime.PodVisitor).VisitPods(ctx, all, func(p *runtime.Pod) {
		lent := p.Clone()
		fn(lent)
		lent.ID, lent.Name, lent.Namespace = "scribbled", "scribbled", "scribbled"
		for _, list := range [2][]*runtime.Container{lent.Sandboxes, lent.Containers} {
			for _, c := range list {
				c.ID.ID, c.State = "scribbled", runtime.ContainerStateUnknown
			}
		}
	})
}

type env struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	fake  *fakecri.Runtime
	rt    *counting
	cache *pleg.Cache
	gen   *pleg.Generic
	reg   *prometheus.Registry
	ctx   context.Context
}

// newEnv relists through runtime.PodVisitor, as the agent does on
// runtime/cri; newEnvMode with visit false through GetPods, as on a
// runtime without it.
func newEnv(t *testing.T, buffer int) *env { t.Helper(); return newEnvMode(t, buffer, true) }

func newEnvMode(t *testing.T, buffer int, visit bool) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	fake, _ := fakecri.New(fakecri.Config{Clock: clk, Images: []string{"busybox:1.36"}})
	inner, err := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: t.TempDir(), PodsDir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	rt := &counting{Runtime: inner}
	var relisted runtime.Runtime = rt
	if visit {
		relisted = lending{rt}
	}
	cache := pleg.NewCache()
	reg := prometheus.NewRegistry()
	gen, err := pleg.NewGeneric(pleg.Config{Runtime: relisted, Cache: cache, Clock: clk, EventBuffer: buffer, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, clock: clk, fake: fake, rt: rt, cache: cache, gen: gen, reg: reg, ctx: context.Background()}
}

func testPod(name string, env ...string) *v1.Pod {
	c := v1.Container{Name: "c", Image: "busybox:1.36"}
	for i := 0; i < len(env); i += 2 {
		c.Env = append(c.Env, v1.EnvVar{Name: env[i], Value: env[i+1]})
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{c}},
	}
}

// drain returns the buffered events as "type pod", sorted.
func (e *env) drain() []string {
	var out []string
	for {
		select {
		case ev := <-e.gen.Watch():
			out = append(out, string(ev.Type)+" "+string(ev.ID))
		default:
			sort.Strings(out)
			return out
		}
	}
}

// forEachListing runs a test on an env that relists through
// runtime.PodVisitor and on one that relists through GetPods.
func forEachListing(t *testing.T, buffer int, test func(t *testing.T, e *env)) {
	t.Run("visit", func(t *testing.T) { test(t, newEnv(t, buffer)) })
	t.Run("list", func(t *testing.T) { test(t, newEnvMode(t, buffer, false)) })
}

func TestRelistEvents(t *testing.T) {
	forEachListing(t, 100, func(t *testing.T, e *env) {
		a := testPod("a", fakecri.EnvExitAfter, "10s", fakecri.EnvExitCode, "0")
		if err := e.rt.SyncPod(e.ctx, a, nil).Error(); err != nil {
			t.Fatal(err)
		}
		e.gen.Relist(e.ctx)
		// The sandbox and the container started.
		if diff := cmp.Diff([]string{"ContainerStarted uid-a", "ContainerStarted uid-a"}, e.drain()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		st, err := e.cache.Get(a.UID)
		if err != nil || st.FindContainerStatus("c") == nil || st.FindContainerStatus("c").State != runtime.ContainerStateRunning {
			t.Fatalf("cache after the first relist: %+v %v", st, err)
		}

		// Nothing changed: no event and no inspection beyond the list.
		before := e.rt.inspections.Load()
		e.gen.Relist(e.ctx)
		if got := e.drain(); len(got) != 0 || e.rt.inspections.Load() != before {
			t.Errorf("an unchanged relist: events %v, %d inspections", got, e.rt.inspections.Load()-before)
		}

		e.clock.Step(10 * time.Second) // the container exits
		e.gen.Relist(e.ctx)
		if diff := cmp.Diff([]string{"ContainerDied uid-a"}, e.drain()); diff != "" {
			t.Errorf("events after the exit (-want +got):\n%s", diff)
		}
		if st, _ := e.cache.Get(a.UID); st.FindContainerStatus("c").State != runtime.ContainerStateExited {
			t.Error("the cache missed the exit")
		}

		// Everything removed: died for the sandbox, removed for both.
		if err := e.rt.KillPod(e.ctx, a, nil, nil); err != nil {
			t.Fatal(err)
		}
		for _, sb := range mustStatus(t, e, a).SandboxStatuses {
			if err := e.fake.RemovePodSandbox(e.ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
		}
		e.gen.Relist(e.ctx)
		if diff := cmp.Diff([]string{"ContainerDied uid-a", "ContainerRemoved uid-a", "ContainerRemoved uid-a"}, e.drain()); diff != "" {
			t.Errorf("events after removal (-want +got):\n%s", diff)
		}
		if st, _ := e.cache.Get(a.UID); len(st.ContainerStatuses) != 0 {
			t.Error("the cache kept a removed pod")
		}
	})
}

func mustStatus(t *testing.T, e *env, p *v1.Pod) *runtime.PodStatus {
	t.Helper()
	st, err := e.rt.GetPodStatus(e.ctx, p.UID, p.Name, p.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRelistCostIsTheListForUnchangedPods(t *testing.T) {
	forEachListing(t, 1000, func(t *testing.T, e *env) {
		for i := 0; i < 50; i++ {
			p := testPod("p" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
			if err := e.rt.SyncPod(e.ctx, p, nil).Error(); err != nil {
				t.Fatal(err)
			}
		}
		e.gen.Relist(e.ctx)
		e.fake.ResetCalls()
		before := e.rt.inspections.Load()
		for i := 0; i < 5; i++ {
			e.gen.Relist(e.ctx)
		}
		if n := e.rt.inspections.Load() - before; n != 0 {
			t.Errorf("%d inspections for 5 relists of 50 unchanged pods, want 0", n)
		}
		if diff := cmp.Diff(10, len(e.fake.Calls())); diff != "" {
			t.Errorf("CRI calls for 5 relists (-want +got):\n%s (%v)", diff, e.fake.Calls())
		}
	})
}

// A pod whose inspection failed is inspected again at the next relist,
// though its containers did not change, until an inspection succeeds.
func TestFailedInspectionIsRetriedOnUnchangedPods(t *testing.T) {
	forEachListing(t, 100, func(t *testing.T, e *env) {
		a := testPod("a")
		if err := e.rt.SyncPod(e.ctx, a, nil).Error(); err != nil {
			t.Fatal(err)
		}
		e.rt.failing.Store(true)
		e.gen.Relist(e.ctx)
		if _, err := e.cache.Get(a.UID); err == nil {
			t.Fatal("the cache holds no error after a failed inspection")
		}
		e.rt.failing.Store(false)
		before := e.rt.inspections.Load()
		e.gen.Relist(e.ctx)
		if n := e.rt.inspections.Load() - before; n != 1 {
			t.Errorf("%d inspections after a failed one, want 1", n)
		}
		if st, err := e.cache.Get(a.UID); err != nil || st.FindContainerStatus("c") == nil {
			t.Errorf("the cache after the retry: %+v, %v", st, err)
		}
		before = e.rt.inspections.Load()
		e.gen.Relist(e.ctx)
		if n := e.rt.inspections.Load() - before; n != 0 {
			t.Errorf("%d inspections once one succeeded, want 0", n)
		}
	})
}

// A relist whose list fails changes nothing: the next one finds the
// pods as they were recorded, and emits no event and inspects nothing.
func TestFailedListChangesNothing(t *testing.T) {
	forEachListing(t, 100, func(t *testing.T, e *env) {
		a := testPod("a")
		if err := e.rt.SyncPod(e.ctx, a, nil).Error(); err != nil {
			t.Fatal(err)
		}
		e.gen.Relist(e.ctx)
		if got := e.drain(); len(got) != 2 {
			t.Fatalf("events of a new pod: %v, want two starts", got)
		}
		before := e.rt.inspections.Load()
		e.rt.failList.Store(true)
		e.gen.Relist(e.ctx)
		e.rt.failList.Store(false)
		e.gen.Relist(e.ctx)
		if got := e.drain(); len(got) != 0 || e.rt.inspections.Load() != before {
			t.Errorf("a failed list and a good one of an unchanged pod: events %v, %d inspections; want none", got, e.rt.inspections.Load()-before)
		}
		if st, err := e.cache.Get(a.UID); err != nil || st.FindContainerStatus("c") == nil {
			t.Errorf("the cache after a failed list: %+v, %v", st, err)
		}
	})
}

// A panic in the runtime's list or inspection is that call's error,
// counted: the relist goes on as after a failed call, and the pod is
// inspected again once the runtime behaves.
func TestRuntimePanicsAreTheCallsErrors(t *testing.T) {
	forEachListing(t, 100, func(t *testing.T, e *env) {
		a := testPod("a")
		if err := e.rt.SyncPod(e.ctx, a, nil).Error(); err != nil {
			t.Fatal(err)
		}
		e.rt.panicking.Store(true)
		e.gen.Relist(e.ctx)
		e.rt.panicking.Store(false)
		if _, err := e.cache.Get(a.UID); err == nil || !strings.Contains(err.Error(), "the runtime panicked: inspection exploded") {
			t.Fatalf("the cache after an inspection that panicked: %v, want the panic", err)
		}
		e.drain()
		e.rt.panicList.Store(true)
		e.gen.Relist(e.ctx)
		e.rt.panicList.Store(false)
		if got := e.drain(); len(got) != 0 {
			t.Errorf("events of a list that panicked: %v", got)
		}
		if got := testutil.ToFloat64(counter(t, e.reg, "nodekit_pleg_runtime_panics_total")); got != 2 {
			t.Errorf("nodekit_pleg_runtime_panics_total %v, want 2", got)
		}
		e.gen.Relist(e.ctx)
		if st, err := e.cache.Get(a.UID); err != nil || st.FindContainerStatus("c") == nil {
			t.Errorf("the cache once the runtime behaves: %+v, %v", st, err)
		}
	})
}

func TestGetNewerThanWaitsForARelist(t *testing.T) {
	e := newEnv(t, 100)
	a := testPod("a")
	if err := e.rt.SyncPod(e.ctx, a, nil).Error(); err != nil {
		t.Fatal(err)
	}
	got := make(chan *runtime.PodStatus, 1)
	go func() {
		st, _ := e.cache.GetNewerThan(e.ctx, a.UID, t0)
		got <- st
	}()
	select {
	case <-got:
		t.Fatal("GetNewerThan returned before any observation")
	default:
	}
	e.clock.Step(time.Second)
	e.gen.Relist(e.ctx)
	if st := <-got; st.FindContainerStatus("c") == nil {
		t.Errorf("status after the relist: %+v", st)
	}

	// A context that ends unblocks the reader.
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := e.cache.GetNewerThan(ctx, a.UID, e.clock.Now().Add(time.Hour)); err == nil {
		t.Error("GetNewerThan with a cancelled context returned no error")
	}
}

func TestHealthAndABlockedReader(t *testing.T) {
	e := newEnv(t, 1)
	for _, name := range []string{"a", "b"} {
		if err := e.rt.SyncPod(e.ctx, testPod(name), nil).Error(); err != nil {
			t.Fatal(err)
		}
	}
	// 4 events, room for 1: the relist waits for the reader, and nothing
	// is lost.
	done := make(chan struct{})
	go func() { e.gen.Relist(e.ctx); close(done) }()
	var got []string
	for len(got) < 4 {
		ev := <-e.gen.Watch()
		got = append(got, string(ev.Type)+" "+string(ev.ID))
	}
	<-done
	sort.Strings(got)
	if diff := cmp.Diff([]string{"ContainerStarted uid-a", "ContainerStarted uid-a", "ContainerStarted uid-b", "ContainerStarted uid-b"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(counter(t, e.reg, "kubelet_pleg_discard_events")); got != 0 {
		t.Errorf("discarded %v events, want 0", got)
	}
	if err := e.gen.Healthy(); err != nil {
		t.Errorf("healthy right after a relist: %v", err)
	}
	e.clock.Step(3*time.Minute + time.Second)
	if err := e.gen.Healthy(); err == nil {
		t.Error("healthy 3 minutes after the last relist")
	}

	// A relist whose context ends while the reader is away counts the
	// unsent events.
	e.clock.Step(time.Second)
	for _, name := range []string{"c", "d"} {
		if err := e.rt.SyncPod(e.ctx, testPod(name), nil).Error(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done = make(chan struct{})
	go func() { e.gen.Relist(ctx); close(done) }()
	<-e.gen.Watch() // take one, then leave
	for len(e.gen.Watch()) == 0 {
		goruntime.Gosched()
	}
	cancel()
	<-done
	if got := testutil.ToFloat64(counter(t, e.reg, "kubelet_pleg_discard_events")); got != 2 {
		t.Errorf("discarded %v events after cancel, want 2", got)
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, func() float64 { return mf.GetMetric()[0].GetCounter().GetValue() })
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

func TestRunStopsWithContext(t *testing.T) {
	e := newEnv(t, 10)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.gen.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}
