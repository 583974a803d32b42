package eviction_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/eviction"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// first is the first pod a pass evicted, or nil.
func first(pods []*v1.Pod) *v1.Pod {
	if len(pods) == 0 {
		return nil
	}
	return pods[0]
}

const mi = 1 << 20

// node is a fake node: its free memory and disk and its pods' usage can
// be changed between passes.
type node struct {
	mu        sync.Mutex
	memAvail  uint64 // bytes
	memUsed   uint64
	fsAvail   uint64
	fsCap     uint64
	pods      []*v1.Pod
	usage     map[string]uint64 // pod name → working set bytes
	disk      map[string]uint64 // pod name → ephemeral bytes
	killed    []string
	grace     []int64
	messages  []string
	conds     []*v1.PodCondition // each kill's DisruptionTarget
	reclaimed []string
}

func (n *node) summary(context.Context) (*statsapi.Summary, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	u := func(v uint64) *uint64 { return &v }
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		Memory: &statsapi.MemoryStats{AvailableBytes: u(n.memAvail), WorkingSetBytes: u(n.memUsed)},
	}}
	if n.fsCap > 0 {
		s.Node.Fs = &statsapi.FsStats{AvailableBytes: u(n.fsAvail), CapacityBytes: u(n.fsCap)}
	}
	for _, p := range n.pods {
		ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}}
		if w, ok := n.usage[p.Name]; ok {
			ps.Memory = &statsapi.MemoryStats{WorkingSetBytes: u(w)}
			ps.Containers = []statsapi.ContainerStats{{Name: "c", Memory: &statsapi.MemoryStats{WorkingSetBytes: u(w)}}}
		}
		if d, ok := n.disk[p.Name]; ok {
			ps.EphemeralStorage = &statsapi.FsStats{UsedBytes: u(d)}
		}
		s.Pods = append(s.Pods, ps)
	}
	return s, nil
}

func (n *node) active() []*v1.Pod {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*v1.Pod(nil), n.pods...)
}

func (n *node) kill(_ context.Context, p *v1.Pod, e eviction.Eviction) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.killed = append(n.killed, p.Name)
	n.grace = append(n.grace, e.GracePeriod)
	n.messages = append(n.messages, e.Message)
	n.conds = append(n.conds, e.DisruptionTarget)
	for i, q := range n.pods {
		if q.UID == p.UID {
			n.pods = append(n.pods[:i:i], n.pods[i+1:]...)
			break
		}
	}
	return nil
}

func (n *node) set(f func(n *node)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n)
}

func (n *node) kills() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.killed...)
}

func mkPod(name string, memRequest string, priority int32) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Spec:       v1.PodSpec{Priority: &priority, Containers: []v1.Container{{Name: "c"}}},
	}
	if memRequest != "" {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(memRequest)}
	}
	return p
}

func newManager(t *testing.T, n *node, clk *clocktesting.FakeClock, spec eviction.Spec, mut ...func(*eviction.Config)) *eviction.Manager {
	t.Helper()
	ts, err := eviction.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg := eviction.Config{Summary: n.summary, ActivePods: n.active, Kill: n.kill, Thresholds: ts, Clock: clk, MaxPodGracePeriodSeconds: 30}
	for _, m := range mut {
		m(&cfg)
	}
	m, err := eviction.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func pressure(m *eviction.Manager) string {
	mem, disk, pid := m.Pressure()
	return fmt.Sprintf("memory=%v disk=%v pid=%v", mem, disk, pid)
}

// Memory pressure appears: the pod using most above its request among
// those exceeding their requests is evicted at once (grace 1s) with the
// kubelet's message; the node reports MemoryPressure.
func TestMemoryPressureEvictsThePodOverItsRequest(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := &node{memAvail: 1024 * mi, memUsed: 1024 * mi, usage: map[string]uint64{"within": 150 * mi, "over": 300 * mi, "high": 400 * mi}}
	n.pods = []*v1.Pod{mkPod("within", "200Mi", 0), mkPod("over", "100Mi", 0), mkPod("high", "", 1000)}
	reg := prometheus.NewRegistry()
	m := newManager(t, n, clk, eviction.Spec{Hard: map[string]string{"memory.available": "100Mi"}}, func(c *eviction.Config) { c.Registerer = reg })
	if got := first(m.Synchronize(context.Background())); got != nil || pressure(m) != "memory=false disk=false pid=false" {
		t.Fatalf("without pressure: evicted %v, %s", got, pressure(m))
	}
	n.set(func(n *node) { n.memAvail = 50 * mi })
	got := first(m.Synchronize(context.Background()))
	if got == nil || got.Name != "over" {
		t.Fatalf("evicted %v, want over (exceeds its request, lowest priority)", got)
	}
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 300Mi, request is 100Mi, has larger consumption of memory. "
	if n.messages[0] != want || n.grace[0] != 1 {
		t.Errorf("message %q grace %d, want %q grace 1", n.messages[0], n.grace[0], want)
	}
	wantCond := &v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet", Message: want}
	if d := cmp.Diff(wantCond, n.conds[0]); d != "" {
		t.Errorf("DisruptionTarget condition (-want +got):\n%s", d)
	}
	if pressure(m) != "memory=true disk=false pid=false" {
		t.Errorf("pressure %s, want memory", pressure(m))
	}
	// Next pass: still short, the next in rank goes (high exceeds its
	// zero request, within does not).
	clk.Step(10 * time.Second)
	if got := first(m.Synchronize(context.Background())); got == nil || got.Name != "high" {
		t.Fatalf("second eviction %v, want high", got)
	}
	want = `
# HELP kubelet_evictions Cumulative number of pod evictions by eviction signal
# TYPE kubelet_evictions counter
kubelet_evictions{eviction_signal="memory.available"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_evictions"); err != nil {
		t.Error(err)
	}
}

// A soft threshold evicts only once it has been met for its grace
// period, with the pod's grace period capped by MaxPodGracePeriodSeconds.
func TestSoftThresholdWaitsItsGracePeriod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := &node{memAvail: 200 * mi, memUsed: 800 * mi, usage: map[string]uint64{"a": 100 * mi}}
	grace := int64(60)
	p := mkPod("a", "", 0)
	p.Spec.TerminationGracePeriodSeconds = &grace
	n.pods = []*v1.Pod{p}
	m := newManager(t, n, clk, eviction.Spec{
		Soft: map[string]string{"memory.available": "300Mi"}, SoftGracePeriod: map[string]string{"memory.available": "1m"},
	})
	for _, step := range []time.Duration{0, 30 * time.Second, 29 * time.Second} {
		clk.Step(step)
		if got := first(m.Synchronize(context.Background())); got != nil {
			t.Fatalf("evicted %s %v after the threshold was first met, before its 1m grace", got.Name, clk.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
		}
		if pressure(m) != "memory=true disk=false pid=false" {
			t.Fatalf("pressure %s during the grace period, want memory", pressure(m))
		}
	}
	clk.Step(time.Second)
	if got := first(m.Synchronize(context.Background())); got == nil || got.Name != "a" {
		t.Fatalf("evicted %v after the grace period, want a", got)
	}
	if n.grace[0] != 30 {
		t.Errorf("grace %d, want 30 (MaxPodGracePeriodSeconds, below the pod's 60)", n.grace[0])
	}
}

// A pressure condition stays for the transition period after its
// threshold stopped being met, then clears.
func TestPressureConditionStaysForTheTransitionPeriod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := &node{memAvail: 50 * mi, memUsed: 900 * mi}
	m := newManager(t, n, clk, eviction.Spec{Hard: map[string]string{"memory.available": "100Mi"}})
	first(m.Synchronize(context.Background()))
	if pressure(m) != "memory=true disk=false pid=false" {
		t.Fatalf("pressure %s, want memory", pressure(m))
	}
	n.set(func(n *node) { n.memAvail = 500 * mi })
	for _, step := range []time.Duration{10 * time.Second, 4 * time.Minute, 49 * time.Second} {
		clk.Step(step)
		first(m.Synchronize(context.Background()))
		if pressure(m) != "memory=true disk=false pid=false" {
			t.Fatalf("pressure cleared %v after relief, before the 5m transition period", clk.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
		}
	}
	clk.Step(time.Second)
	first(m.Synchronize(context.Background()))
	if pressure(m) != "memory=false disk=false pid=false" {
		t.Errorf("pressure %s 5m after relief, want none", pressure(m))
	}
}

// A met threshold stays met until its minimum reclaim is available.
func TestMinimumReclaimKeepsEvicting(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := &node{memAvail: 50 * mi, memUsed: 900 * mi, usage: map[string]uint64{"a": 10 * mi, "b": 10 * mi}}
	n.pods = []*v1.Pod{mkPod("a", "", 0), mkPod("b", "", 0)}
	m := newManager(t, n, clk, eviction.Spec{Hard: map[string]string{"memory.available": "100Mi"}, MinimumReclaim: map[string]string{"memory.available": "100Mi"}})
	first(m.Synchronize(context.Background()))
	n.set(func(n *node) { n.memAvail = 150 * mi }) // above 100Mi, below 100Mi + 100Mi
	clk.Step(10 * time.Second)
	if got := first(m.Synchronize(context.Background())); got == nil {
		t.Fatalf("no eviction with 150Mi available, below the threshold plus its minimum reclaim")
	}
	n.set(func(n *node) { n.memAvail = 250 * mi })
	clk.Step(10 * time.Second)
	if got := first(m.Synchronize(context.Background())); got != nil {
		t.Fatalf("evicted %s with the minimum reclaim available", got.Name)
	}
}

// Disk pressure first frees dead containers and unused images; when
// that is enough no pod is evicted, otherwise the largest user goes.
func TestDiskPressureReclaimsBeforeEvicting(t *testing.T) {
	for _, relief := range []bool{true, false} {
		t.Run(fmt.Sprintf("reclaim enough=%v", relief), func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			n := &node{memAvail: 1024 * mi, memUsed: 100 * mi, fsAvail: 5 * mi, fsCap: 100 * mi, disk: map[string]uint64{"small": 1 * mi, "big": 50 * mi}}
			n.pods = []*v1.Pod{mkPod("small", "", 0), mkPod("big", "", 0)}
			reclaim := func(what string) eviction.ReclaimFunc {
				return func(context.Context) error {
					n.set(func(n *node) {
						n.reclaimed = append(n.reclaimed, what)
						if relief {
							n.fsAvail += 10 * mi
						}
					})
					return nil
				}
			}
			m := newManager(t, n, clk, eviction.Spec{Hard: map[string]string{"nodefs.available": "10%"}}, func(c *eviction.Config) {
				c.ReclaimContainers, c.ReclaimImages = reclaim("containers"), reclaim("images")
			})
			got := first(m.Synchronize(context.Background()))
			if strings.Join(n.reclaimed, ",") != "containers,images" {
				t.Errorf("reclaimed %v, want containers then images", n.reclaimed)
			}
			switch {
			case relief && got != nil:
				t.Errorf("evicted %s although the reclaim freed enough", got.Name)
			case !relief && (got == nil || got.Name != "big"):
				t.Errorf("evicted %v, want big", got)
			}
			if !relief && !strings.HasPrefix(n.messages[0], "The node was low on resource: ephemeral-storage. Threshold quantity: 10Mi, available: 5Mi. ") {
				t.Errorf("message %q", n.messages[0])
			}
			if pressure(m) != "memory=false disk=true pid=false" {
				t.Errorf("pressure %s, want disk", pressure(m))
			}
		})
	}
}

// Critical pods are never evicted, whatever their usage.
func TestCriticalPodsAreNotEvicted(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	static := mkPod("static", "", 0)
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	n := &node{memAvail: 50 * mi, memUsed: 900 * mi, usage: map[string]uint64{"static": 800 * mi, "system": 700 * mi, "small": 1 * mi}}
	n.pods = []*v1.Pod{static, mkPod("system", "", 2000000000), mkPod("small", "", 0)}
	m := newManager(t, n, clk, eviction.Spec{Hard: map[string]string{"memory.available": "100Mi"}})
	if got := first(m.Synchronize(context.Background())); got == nil || got.Name != "small" {
		t.Fatalf("evicted %v, want small (the others are critical)", got)
	}
}

// Run makes a pass at once and then every MonitoringInterval on its
// clock, and stops with its context.
func TestRunPassesOnItsClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := &node{memAvail: 500 * mi, memUsed: 500 * mi, usage: map[string]uint64{"a": 10 * mi}}
	n.pods = []*v1.Pod{mkPod("a", "", 0)}
	m := newManager(t, n, clk, eviction.Spec{Hard: map[string]string{"memory.available": "100Mi"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "Run to wait on its ticker", clk.HasWaiters)
	n.set(func(n *node) { n.memAvail = 50 * mi })
	clk.Step(9 * time.Second)
	if k := n.kills(); len(k) != 0 {
		t.Fatalf("killed %v before the 10s interval", k)
	}
	clk.Step(time.Second)
	waitFor(t, "an eviction at the 10s pass", func() bool { return len(n.kills()) == 1 })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewRequiresItsFuncs(t *testing.T) {
	n := &node{}
	for name, cfg := range map[string]eviction.Config{
		"Config.Summary":    {ActivePods: n.active, Kill: n.kill},
		"Config.ActivePods": {Summary: n.summary, Kill: n.kill},
		"Config.Kill":       {Summary: n.summary, ActivePods: n.active},
	} {
		if _, err := eviction.New(cfg); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New without %s: %v", name, err)
		}
	}
	bad := eviction.Config{Summary: n.summary, ActivePods: n.active, Kill: n.kill, Thresholds: []eviction.Threshold{{Signal: "memory.free"}}}
	if _, err := eviction.New(bad); err == nil || !strings.Contains(err.Error(), "Config.Thresholds[0]") {
		t.Errorf("New with a bad threshold: %v", err)
	}
	bad = eviction.Config{Summary: n.summary, ActivePods: n.active, Kill: n.kill, AllocatableMemory: resource.MustParse("-1Gi")}
	if _, err := eviction.New(bad); err == nil || !strings.Contains(err.Error(), "Config.AllocatableMemory") {
		t.Errorf("New with a negative allocatable memory: %v", err)
	}
}
