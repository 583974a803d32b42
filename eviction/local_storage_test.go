package eviction_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/eviction"
)

// storage adds per-pod volume and container disk figures to a fake node.
type storage struct {
	*node
	smu   sync.Mutex
	stats map[string]statsapi.PodStats // pod name → volume, container and ephemeral figures
	event []string
}

func (s *storage) summary(ctx context.Context) (*statsapi.Summary, error) {
	sum, err := s.node.summary(ctx)
	if err != nil {
		return nil, err
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	for i := range sum.Pods {
		if ps, ok := s.stats[sum.Pods[i].PodRef.Name]; ok {
			ps.PodRef = sum.Pods[i].PodRef
			sum.Pods[i] = ps
		}
	}
	return sum, nil
}

func (s *storage) setStats(name string, ps statsapi.PodStats) {
	s.smu.Lock()
	defer s.smu.Unlock()
	s.stats[name] = ps
}

func (s *storage) events(p *v1.Pod, typ, reason, msg string) {
	if p == nil {
		return
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	s.event = append(s.event, p.Name+" "+typ+" "+reason+": "+msg)
}

func used(v uint64) *statsapi.FsStats { return &statsapi.FsStats{UsedBytes: &v} }

// storagePod has containers named by limits (container name → its
// ephemeral-storage limit, "" for none) and an emptyDir "scratch" with
// sizeLimit (none when "").
func storagePod(name, sizeLimit string, limits map[string]string) *v1.Pod {
	p := mkPod(name, "", 0)
	p.Spec.Containers = nil
	for _, c := range []string{"app", "helper"} {
		l, ok := limits[c]
		if !ok {
			continue
		}
		ctr := v1.Container{Name: c}
		if l != "" {
			ctr.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(l)}
		}
		p.Spec.Containers = append(p.Spec.Containers, ctr)
	}
	ed := &v1.EmptyDirVolumeSource{}
	if sizeLimit != "" {
		q := resource.MustParse(sizeLimit)
		ed.SizeLimit = &q
	}
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: ed}}}
	return p
}

func newStorageManager(t *testing.T, s *storage, clk *clocktesting.FakeClock, reg prometheus.Registerer, mut ...func(*eviction.Config)) *eviction.Manager {
	t.Helper()
	cfg := eviction.Config{
		Summary: s.summary, ActivePods: s.active, Kill: s.kill, Events: s.events, Clock: clk,
		Thresholds: []eviction.Threshold{}, Registerer: reg, MaxPodGracePeriodSeconds: 30,
	}
	for _, m := range mut {
		m(&cfg)
	}
	m, err := eviction.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newStorage(pods ...*v1.Pod) *storage {
	return &storage{node: &node{pods: pods}, stats: map[string]statsapi.PodStats{}}
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// An emptyDir using more than its sizeLimit gets its pod evicted at once
// (grace 1s), with no threshold configured, with the kubelet's message,
// a warning event Evicted and kubelet_evictions{emptydirfs.limit}.
func TestEmptyDirOverItsSizeLimitEvictsThePod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStorage(storagePod("scratchy", "100Mi", map[string]string{"app": ""}))
	s.setStats("scratchy", statsapi.PodStats{VolumeStats: []statsapi.VolumeStats{{Name: "scratch", FsStats: *used(150 * mi)}}})
	reg := prometheus.NewRegistry()
	m := newStorageManager(t, s, clk, reg)

	got := m.Synchronize(context.Background())
	if strings.Join(names(got), ",") != "scratchy" {
		t.Fatalf("evicted %v, want scratchy", names(got))
	}
	const msg = `Usage of EmptyDir volume "scratch" exceeds the limit "100Mi". `
	if len(s.messages) != 1 || s.messages[0] != msg || s.grace[0] != 1 {
		t.Errorf("kill messages %q grace %v, want [%q] [1]", s.messages, s.grace, msg)
	}
	if s.conds[0] != nil {
		t.Errorf("DisruptionTarget %+v for a local storage limit eviction, want none (the kubelet adds it at thresholds only)", s.conds[0])
	}
	if want := "scratchy Warning Evicted: " + msg; len(s.event) != 1 || s.event[0] != want {
		t.Errorf("events %q, want [%q]", s.event, want)
	}
	want := `
# HELP kubelet_evictions Cumulative number of pod evictions by eviction signal
# TYPE kubelet_evictions counter
kubelet_evictions{eviction_signal="emptydirfs.limit"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_evictions"); err != nil {
		t.Error(err)
	}
}

// A pod whose total ephemeral storage exceeds the sum of its containers'
// limits is evicted even though each container is within its own.
func TestPodOverTheSumOfItsContainersLimitsIsEvicted(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStorage(storagePod("sum", "", map[string]string{"app": "100Mi", "helper": "50Mi"}))
	s.setStats("sum", statsapi.PodStats{
		EphemeralStorage: used(200 * mi),
		Containers: []statsapi.ContainerStats{
			{Name: "app", Rootfs: used(90 * mi), Logs: used(1 * mi)},
			{Name: "helper", Rootfs: used(40 * mi), Logs: used(1 * mi)},
		},
	})
	reg := prometheus.NewRegistry()
	m := newStorageManager(t, s, clk, reg)

	if got := names(m.Synchronize(context.Background())); strings.Join(got, ",") != "sum" {
		t.Fatalf("evicted %v, want sum", got)
	}
	const msg = "Pod ephemeral local storage usage exceeds the total limit of containers 150Mi. "
	if len(s.messages) != 1 || s.messages[0] != msg || s.grace[0] != 1 {
		t.Errorf("kill messages %q grace %v, want [%q] [1]", s.messages, s.grace, msg)
	}
	if v := testutil.ToFloat64(counter(t, reg, "ephemeralpodfs.limit")); v != 1 {
		t.Errorf("kubelet_evictions{ephemeralpodfs.limit} = %v, want 1", v)
	}
}

// A container whose logs and writable layer exceed its own limit gets
// its pod evicted; on a dedicated image filesystem the writable layer is
// not counted.
func TestContainerOverItsEphemeralLimitIsEvicted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dedicated bool
		want      string
	}{
		{"shared filesystem", false, "one"},
		{"dedicated image filesystem", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			s := newStorage(storagePod("one", "", map[string]string{"app": "100Mi", "helper": "1Gi"}))
			s.setStats("one", statsapi.PodStats{
				EphemeralStorage: used(111 * mi),
				Containers: []statsapi.ContainerStats{
					{Name: "app", Rootfs: used(80 * mi), Logs: used(30 * mi)},
					{Name: "helper", Rootfs: used(1 * mi)},
				},
			})
			reg := prometheus.NewRegistry()
			m := newStorageManager(t, s, clk, reg, func(c *eviction.Config) { c.DedicatedImageFs = tc.dedicated })

			if got := names(m.Synchronize(context.Background())); strings.Join(got, ",") != tc.want {
				t.Fatalf("evicted %v, want %q", got, tc.want)
			}
			if tc.want == "" {
				return
			}
			const msg = `Container app exceeded its local ephemeral storage limit "100Mi". `
			if len(s.messages) != 1 || s.messages[0] != msg || s.grace[0] != 1 {
				t.Errorf("kill messages %q grace %v, want [%q] [1]", s.messages, s.grace, msg)
			}
			if v := testutil.ToFloat64(counter(t, reg, "ephemeralcontainerfs.limit")); v != 1 {
				t.Errorf("kubelet_evictions{ephemeralcontainerfs.limit} = %v, want 1", v)
			}
		})
	}
}

// Pods within their limits, pods with no limits and critical pods are
// not evicted; every pod over a limit is, in one pass.
func TestOnlyNonCriticalPodsOverALimitAreEvicted(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	within := storagePod("within", "100Mi", map[string]string{"app": "100Mi"})
	unlimited := storagePod("unlimited", "", map[string]string{"app": ""})
	static := storagePod("static", "100Mi", map[string]string{"app": ""})
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	over1 := storagePod("over1", "100Mi", map[string]string{"app": ""})
	over2 := storagePod("over2", "", map[string]string{"app": "10Mi"})
	s := newStorage(within, unlimited, static, over1, over2)
	s.setStats("within", statsapi.PodStats{
		EphemeralStorage: used(100 * mi),
		VolumeStats:      []statsapi.VolumeStats{{Name: "scratch", FsStats: *used(100 * mi)}},
		Containers:       []statsapi.ContainerStats{{Name: "app", Rootfs: used(50 * mi), Logs: used(50 * mi)}},
	})
	s.setStats("unlimited", statsapi.PodStats{
		EphemeralStorage: used(10 << 30),
		VolumeStats:      []statsapi.VolumeStats{{Name: "scratch", FsStats: *used(5 << 30)}},
		Containers:       []statsapi.ContainerStats{{Name: "app", Rootfs: used(5 << 30)}},
	})
	over := statsapi.PodStats{VolumeStats: []statsapi.VolumeStats{{Name: "scratch", FsStats: *used(101 * mi)}}}
	s.setStats("static", over)
	s.setStats("over1", over)
	s.setStats("over2", statsapi.PodStats{EphemeralStorage: used(11 * mi), Containers: []statsapi.ContainerStats{{Name: "app", Logs: used(11 * mi)}}})
	m := newStorageManager(t, s, clk, nil)

	if got := strings.Join(names(m.Synchronize(context.Background())), ","); got != "over1,over2" {
		t.Fatalf("evicted %q, want over1,over2", got)
	}
	if got := strings.Join(s.kills(), ","); got != "over1,over2" {
		t.Errorf("killed %q, want over1,over2", got)
	}
}

// A pass that evicts for a local storage limit evicts nothing for a
// threshold met at the same time; the next pass does.
func TestLocalStorageEvictionComesBeforeThresholds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	hog := mkPod("hog", "", 0)
	s := newStorage(hog, storagePod("scratchy", "1Mi", map[string]string{"app": ""}))
	s.memAvail, s.memUsed, s.usage = 50*mi, 900*mi, map[string]uint64{"hog": 800 * mi}
	s.setStats("scratchy", statsapi.PodStats{VolumeStats: []statsapi.VolumeStats{{Name: "scratch", FsStats: *used(2 * mi)}}})
	ts, err := eviction.Parse(eviction.Spec{Hard: map[string]string{"memory.available": "100Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	m := newStorageManager(t, s, clk, nil, func(c *eviction.Config) { c.Thresholds = ts })

	if got := strings.Join(names(m.Synchronize(context.Background())), ","); got != "scratchy" {
		t.Fatalf("first pass evicted %q, want scratchy only", got)
	}
	if mem, _, _ := m.Pressure(); !mem {
		t.Error("no memory pressure reported in the pass that evicted for local storage")
	}
	clk.Step(10 * time.Second)
	if got := strings.Join(names(m.Synchronize(context.Background())), ","); got != "hog" {
		t.Fatalf("second pass evicted %q, want hog", got)
	}
}

// Run finds a pod that goes over its limit at its next pass on its clock.
func TestRunEvictsAPodThatGoesOverItsLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStorage(storagePod("grower", "", map[string]string{"app": "100Mi"}))
	s.setStats("grower", statsapi.PodStats{EphemeralStorage: used(10 * mi), Containers: []statsapi.ContainerStats{{Name: "app", Rootfs: used(10 * mi)}}})
	m := newStorageManager(t, s, clk, nil)
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
	if k := s.kills(); len(k) != 0 {
		t.Fatalf("killed %v within its limit", k)
	}
	s.setStats("grower", statsapi.PodStats{EphemeralStorage: used(101 * mi), Containers: []statsapi.ContainerStats{{Name: "app", Rootfs: used(101 * mi)}}})
	clk.Step(10 * time.Second)
	waitFor(t, "an eviction at the 10s pass", func() bool { return len(s.kills()) == 1 })
}

func counter(t *testing.T, reg *prometheus.Registry, signal string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "eviction_signal" && l.GetValue() == signal {
					c.Add(mt.GetCounter().GetValue())
				}
			}
		}
	}
	return c
}
