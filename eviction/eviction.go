package eviction

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// Reason is the status reason of an evicted pod, the kubelet's.
const Reason = "Evicted"

// SummaryFunc gives the node's and pods' figures; server.CRIStats's
// Summary method fits. It may block until they are gathered or ctx ends.
type SummaryFunc func(ctx context.Context) (*statsapi.Summary, error)

// KillFunc kills an evicted pod: it stops the pod's containers within
// e.GracePeriod seconds and records its status Failed with reason Evicted
// and e.Message, with e.DisruptionTarget among its conditions when set.
// It may return before the containers are gone. An error means the pod
// was not killed; the manager tries the next pod.
type KillFunc func(ctx context.Context, pod *v1.Pod, e Eviction) error

// Eviction is what the manager asks a KillFunc to do to a pod.
type Eviction struct {
	// GracePeriod is how long, in seconds, the pod's containers get to
	// stop.
	GracePeriod int64
	// Message is the status message, the kubelet's ("The node was low on
	// resource: memory. ...").
	Message string
	// DisruptionTarget, when set, is a condition for the pod's status:
	// type DisruptionTarget, status True, reason TerminationByKubelet and
	// the eviction message, as the kubelet adds it to a pod evicted at a
	// threshold. Evictions for a local storage limit have none, as in the
	// kubelet. The KillFunc may set its LastTransitionTime.
	DisruptionTarget *v1.PodCondition
}

// ReclaimFunc frees node-level resources (dead containers, unused
// images) before pods are evicted for disk.
type ReclaimFunc func(ctx context.Context) error

// Config configures a Manager. Zero fields are the defaults named.
type Config struct {
	// Summary gives the figures the signals are read from. Required.
	Summary SummaryFunc
	// ActivePods lists the pods that hold resources, the candidates for
	// eviction. Required; must be safe for concurrent use.
	ActivePods func() []*v1.Pod
	// Kill kills an evicted pod. Required.
	Kill KillFunc
	// PodCleanedUp, when set, reports whether an evicted pod's
	// resources are freed: after an eviction the manager waits for it
	// (polling every second, up to 30s) before its next pass, as the
	// kubelet does. Nil: the next pass comes after MonitoringInterval.
	PodCleanedUp func(*v1.Pod) bool
	// Thresholds are the eviction thresholds. Nil: the kubelet's
	// defaults, DefaultHard with enforceNodeAllocatable [pods] (so also
	// allocatableMemory.available<100Mi). An empty non-nil slice: none
	// (no pressure, and evictions only for local storage limits). As in
	// the kubelet, the containerfs thresholds are not taken from here but
	// copied from those of the filesystem the containers' writable layers
	// live on (nodefs, or imagefs with DedicatedImageFs and not
	// SplitImageFs); a containerfs threshold given here is ignored, with
	// a log line.
	Thresholds []Threshold
	// AllocatableMemory is the node's allocatable memory (what the pods
	// may use together): allocatableMemory.available is it less the
	// pods' working sets when the Summary has no "pods" system container,
	// whose figures the kubelet uses. Zero: unknown, and without that
	// container allocatableMemory.available is not observed.
	AllocatableMemory resource.Quantity
	// MonitoringInterval is the time between passes. Default 10s, the
	// kubelet's.
	MonitoringInterval time.Duration
	// PressureTransitionPeriod is how long a pressure condition stays
	// after its threshold stopped being met. Default 5m, the kubelet's.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds caps the grace period of a pod evicted for
	// a soft threshold (a hard one kills within 1s). Default 0, the
	// kubelet's: the runtime's minimum applies.
	MaxPodGracePeriodSeconds int64
	// ReclaimContainers and ReclaimImages free disk at node level before
	// any pod is evicted for a disk signal, dead containers first, then
	// unused images, where each helps, as in the kubelet: with one
	// filesystem, both for every disk signal; with DedicatedImageFs, both
	// for imagefs and containerfs and neither for nodefs; with
	// SplitImageFs, containers for nodefs and containerfs, images for
	// imagefs. Nil: nothing to reclaim.
	ReclaimContainers ReclaimFunc
	ReclaimImages     ReclaimFunc
	// DedicatedImageFs says images and the containers' writable layers
	// live on a filesystem of their own (imagefs), apart from the node's
	// (nodefs: logs, volumes). It decides what each disk signal reclaims
	// and what ranking counts of a pod, and containerfs's thresholds.
	DedicatedImageFs bool
	// SplitImageFs says images live on an image filesystem of their own
	// while the writable layers stay on the node's (the kubelet's split
	// image filesystem); it implies DedicatedImageFs.
	SplitImageFs bool
	// Clock paces the passes. Default: the real clock.
	Clock clock.WithTicker
	// Logger: V(0) evictions, V(2) passes that find pressure.
	Logger logr.Logger
	// Events receives warning events: Evicted about a pod, and
	// EvictionThresholdMet (pod nil) about the node. Default: none.
	Events runtime.EventFunc
	// Registerer receives kubelet_evictions{eviction_signal}, the
	// kubelet's counter of evictions. Nil: not registered.
	Registerer prometheus.Registerer
}

// Manager watches the node's signals against thresholds, reports
// pressure conditions, and evicts one pod per pass while a threshold is
// met. Its methods are safe for concurrent use.
type Manager struct {
	cfg         Config
	log         logr.Logger
	evictions   *prometheus.CounterVec
	fs          layout
	allocatable int64 // bytes of AllocatableMemory

	// mu guards the fields below.
	mu                 sync.RWMutex
	conditions         []v1.NodeConditionType             // reported, with the transition period
	firstObservedAt    map[int]time.Time                  // threshold index → first met
	conditionsObserved map[v1.NodeConditionType]time.Time // last met
	metNow             []int                              // met, grace period over
}

// New builds a Manager. It returns an error naming the Config field that
// is missing or wrong. It starts nothing.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Summary == nil:
		return nil, errors.New("eviction: Config.Summary is required")
	case cfg.ActivePods == nil:
		return nil, errors.New("eviction: Config.ActivePods is required")
	case cfg.Kill == nil:
		return nil, errors.New("eviction: Config.Kill is required")
	}
	if cfg.Thresholds == nil {
		ts, err := Parse(Spec{Hard: DefaultHard(), EnforceNodeAllocatable: []string{NodeAllocatableEnforcementPods}})
		if err != nil {
			return nil, err
		}
		cfg.Thresholds = ts
	}
	if cfg.SplitImageFs {
		cfg.DedicatedImageFs = true
	}
	if cfg.AllocatableMemory.Sign() < 0 {
		return nil, fmt.Errorf("eviction: Config.AllocatableMemory %s is negative", cfg.AllocatableMemory.String())
	}
	for i, t := range cfg.Thresholds {
		if _, _, ok := signalInfo(t.Signal); !ok {
			return nil, fmt.Errorf("eviction: Config.Thresholds[%d]: unsupported eviction signal %q", i, t.Signal)
		}
		if t.Value.Quantity == nil && (t.Value.Percentage <= 0 || t.Value.Percentage > 1) {
			return nil, fmt.Errorf("eviction: Config.Thresholds[%d] (%s): no quantity and a percentage outside (0, 1]", i, t.Signal)
		}
	}
	fs := layout{dedicated: cfg.DedicatedImageFs, split: cfg.SplitImageFs}
	ts, ignored := withContainerFs(cfg.Thresholds, fs)
	cfg.Thresholds = ts
	if cfg.MonitoringInterval <= 0 {
		cfg.MonitoringInterval = 10 * time.Second
	}
	if cfg.PressureTransitionPeriod <= 0 {
		cfg.PressureTransitionPeriod = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	if cfg.Events == nil {
		cfg.Events = func(*v1.Pod, string, string, string) {}
	}
	evictions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "kubelet", Name: "evictions", Help: "Cumulative number of pod evictions by eviction signal",
	}, []string{"eviction_signal"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(evictions); err != nil {
			return nil, fmt.Errorf("eviction: registering metrics: %w", err)
		}
	}
	if ignored {
		cfg.Logger.Info("containerfs thresholds are those of the filesystem the containers' writable layers live on; the ones configured are ignored")
	}
	return &Manager{
		cfg: cfg, log: cfg.Logger, evictions: evictions, fs: fs, allocatable: cfg.AllocatableMemory.Value(),
		firstObservedAt:    map[int]time.Time{},
		conditionsObserved: map[v1.NodeConditionType]time.Time{},
	}, nil
}

// Run makes a pass at once and then every MonitoringInterval until ctx
// ends; it returns nil then. A pass that evicted a pod waits for
// PodCleanedUp first, when set.
func (m *Manager) Run(ctx context.Context) error {
	t := m.cfg.Clock.NewTicker(m.cfg.MonitoringInterval)
	defer t.Stop()
	for {
		if evicted := m.Synchronize(ctx); len(evicted) > 0 && m.cfg.PodCleanedUp != nil {
			m.waitForCleanup(ctx, evicted)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

func (m *Manager) waitForCleanup(ctx context.Context, pods []*v1.Pod) {
	timeout := m.cfg.Clock.NewTimer(30 * time.Second)
	defer timeout.Stop()
	poll := m.cfg.Clock.NewTicker(time.Second)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timeout.C():
			for _, p := range pods {
				if !m.cfg.PodCleanedUp(p) {
					m.log.Info("evicted pod was not cleaned up in time", "pod", podutil.FullName(p), "podUID", p.UID)
				}
			}
			return
		case <-poll.C():
			done := true
			for _, p := range pods {
				done = done && m.cfg.PodCleanedUp(p)
			}
			if done {
				return
			}
		}
	}
}

// Pressure reports the node's pressure conditions: a condition holds
// while one of its thresholds is met (grace periods aside) and for
// PressureTransitionPeriod after. It does not block; admission's
// PressureFunc and kube's ConditionsProvider fit it.
func (m *Manager) Pressure() (memory, disk, pid bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, c := range m.conditions {
		switch c {
		case v1.NodeMemoryPressure:
			memory = true
		case v1.NodeDiskPressure:
			disk = true
		case v1.NodePIDPressure:
			pid = true
		}
	}
	return memory, disk, pid
}

// Synchronize makes one pass: it reads the signals and updates the
// pressure conditions; it evicts every non-critical pod over a local
// storage limit (an emptyDir's sizeLimit, the pod's or a container's
// ephemeral-storage limit); if none was, and a threshold is met past its
// grace period, it reclaims node-level disk (for disk signals) and then
// evicts the first non-critical pod in the ranking. It returns the pods
// evicted, or nil. Run calls it; tests and embedders with their own loop
// may call it directly, one pass at a time.
func (m *Manager) Synchronize(ctx context.Context) []*v1.Pod {
	ts := m.cfg.Thresholds
	summary, err := m.cfg.Summary(ctx)
	if err != nil {
		m.log.Error(err, "reading the stats summary failed")
		return nil
	}
	obs := observe(summary, m.allocatable, m.fs)
	all := make([]int, len(ts))
	for i := range ts {
		all[i] = i
	}
	now := m.cfg.Clock.Now()

	m.mu.Lock()
	metIdx := met(ts, obs, all, false)
	// Thresholds met before stay met until their minimum reclaim is.
	metIdx = union(metIdx, met(ts, obs, m.metNow, true))
	first := map[int]time.Time{}
	for _, i := range metIdx {
		at, ok := m.firstObservedAt[i]
		if !ok {
			at = now
		}
		first[i] = at
	}
	for _, i := range metIdx {
		_, cond, _ := signalInfo(ts[i].Signal)
		m.conditionsObserved[cond] = now
	}
	var conds []v1.NodeConditionType
	for c, at := range m.conditionsObserved {
		if now.Sub(at) < m.cfg.PressureTransitionPeriod {
			conds = append(conds, c)
		} else {
			delete(m.conditionsObserved, c)
		}
	}
	sort.Slice(conds, func(i, j int) bool { return conds[i] < conds[j] })
	var due []int
	for _, i := range metIdx {
		if now.Sub(first[i]) >= ts[i].GracePeriod {
			due = append(due, i)
		}
	}
	m.conditions, m.firstObservedAt, m.metNow = conds, first, due
	m.mu.Unlock()

	active := m.cfg.ActivePods()
	stats := podStats(summary)
	if evicted := m.localStorageEviction(ctx, active, stats); len(evicted) > 0 {
		return evicted
	}
	if len(due) == 0 {
		return nil
	}
	// Memory first, then in configuration order.
	sort.SliceStable(due, func(a, b int) bool {
		return isMemory(ts[due[a]].Signal) && !isMemory(ts[due[b]].Signal)
	})
	t := ts[due[0]]
	res, _, _ := signalInfo(t.Signal)
	m.log.V(2).Info("eviction threshold met", "threshold", t.String(), "resource", res)
	m.cfg.Events(nil, v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim "+string(res))
	if m.reclaimNode(ctx, t.Signal) {
		m.log.V(2).Info("node-level reclaim relieved the pressure without evicting pods", "resource", res)
		return nil
	}
	pods := active
	if len(pods) == 0 {
		m.log.Info("eviction threshold met, but no pod to evict", "threshold", t.String())
		return nil
	}
	pods = append([]*v1.Pod(nil), pods...)
	rank(pods, res, m.fs.measure(t.Signal), stats)
	for _, p := range pods {
		if podutil.IsCritical(p) {
			continue
		}
		grace := int64(1)
		if !t.Hard() {
			grace = m.cfg.MaxPodGracePeriodSeconds
			if p.Spec.TerminationGracePeriodSeconds != nil && *p.Spec.TerminationGracePeriodSeconds < grace {
				grace = *p.Spec.TerminationGracePeriodSeconds
			}
		}
		msg := message(res, p, stats, t, obs[t.Signal])
		m.cfg.Events(p, v1.EventTypeWarning, Reason, msg)
		m.log.Info("evicting pod", "pod", podutil.FullName(p), "podUID", p.UID, "message", msg)
		cond := &v1.PodCondition{
			Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
			Reason: v1.PodReasonTerminationByKubelet, Message: msg,
		}
		if err := m.cfg.Kill(ctx, p, Eviction{GracePeriod: grace, Message: msg, DisruptionTarget: cond}); err != nil {
			m.log.Error(err, "evicting pod failed", "pod", podutil.FullName(p), "podUID", p.UID)
			continue
		}
		m.evictions.WithLabelValues(string(t.Signal)).Inc()
		return []*v1.Pod{p}
	}
	m.log.Info("unable to evict any pod", "threshold", t.String())
	return nil
}

// reclaimNode runs the node-level reclaim for a disk signal and reports
// whether no threshold (with its minimum reclaim) is met afterwards.
func (m *Manager) reclaimNode(ctx context.Context, s Signal) bool {
	var funcs []ReclaimFunc
	if containers, images := m.fs.reclaim(s); containers || images {
		if containers {
			funcs = append(funcs, m.cfg.ReclaimContainers)
		}
		if images {
			funcs = append(funcs, m.cfg.ReclaimImages)
		}
	}
	ran := false
	for _, f := range funcs {
		if f == nil {
			continue
		}
		ran = true
		if err := f(ctx); err != nil {
			m.log.Info("node-level reclaim failed", "signal", s, "err", err.Error())
		}
	}
	if !ran {
		return false
	}
	summary, err := m.cfg.Summary(ctx)
	if err != nil {
		m.log.Error(err, "reading the stats summary after reclaim failed")
		return false
	}
	all := make([]int, len(m.cfg.Thresholds))
	for i := range all {
		all[i] = i
	}
	return len(met(m.cfg.Thresholds, observe(summary, m.allocatable, m.fs), all, true)) == 0
}

// message is the kubelet's eviction message: the resource, the
// threshold and what was available, and each container using more than
// it requests.
func message(res v1.ResourceName, p *v1.Pod, stats statsFunc, t Threshold, o observation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The node was low on resource: %s. ", res)
	if o.available != nil {
		fmt.Fprintf(&b, "Threshold quantity: %v, available: %v. ", t.Value.of(o.capacity), o.available)
	}
	ps, ok := stats(p)
	if !ok {
		return b.String()
	}
	containers := append(append([]v1.Container(nil), p.Spec.Containers...), p.Spec.InitContainers...)
	for _, cs := range ps.Containers {
		for _, c := range containers {
			if c.Name != cs.Name {
				continue
			}
			var use *resource.Quantity
			switch res {
			case v1.ResourceMemory:
				if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
					use = resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
				}
			case v1.ResourceEphemeralStorage:
				if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
					use = resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
				}
			}
			req := c.Resources.Requests[res]
			if use != nil && use.Cmp(req) > 0 {
				fmt.Fprintf(&b, "Container %s was using %s, request is %s, has larger consumption of %s. ", c.Name, use, req.String(), res)
			}
			break
		}
	}
	return b.String()
}

func union(a, b []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, x := range append(a, b...) {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Ints(out)
	return out
}
