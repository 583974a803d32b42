package status

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Sink is where pod statuses go: memory, a callback, an API server. It
// is called from Manager.Run only, one call at a time, with the newest
// status of a pod; an error makes the Manager try again later.
type Sink interface {
	UpdatePodStatus(ctx context.Context, pod *v1.Pod, status v1.PodStatus) error
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, pod *v1.Pod, status v1.PodStatus) error

// UpdatePodStatus calls f.
func (f SinkFunc) UpdatePodStatus(ctx context.Context, pod *v1.Pod, status v1.PodStatus) error {
	return f(ctx, pod, status)
}

// Config configures a Manager.
type Config struct {
	// Sink receives status changes. Default: none (statuses are only
	// kept in the Manager).
	Sink Sink
	// RetryPeriod is how soon a status the sink refused is sent again.
	// Default 10s.
	RetryPeriod time.Duration
	// Clock drives retries and transition times. Default: the real clock.
	Clock clock.WithTicker
	// Logger logs sink failures. Default: discard.
	Logger logr.Logger
}

// Manager keeps the latest status of every pod with a version that grows
// on every change, merges the probes' readiness and startup verdicts into
// it, and pushes changes to its Sink. Methods are safe for concurrent use.
type Manager struct {
	cfg    Config
	notify chan struct{} // capacity 1: "something is dirty"

	// mu guards everything below.
	mu      sync.Mutex
	pods    map[types.UID]*entry
	ready   map[string]bool // container ID → readiness verdict
	started map[string]bool // container ID → startup verdict
}

type entry struct {
	pod     *v1.Pod
	status  v1.PodStatus
	version uint64
	sent    uint64 // the version the sink accepted
}

// New returns a Manager. It starts nothing; call Run to push to the sink.
func New(cfg Config) *Manager {
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &Manager{
		cfg:     cfg,
		notify:  make(chan struct{}, 1),
		pods:    map[types.UID]*entry{},
		ready:   map[string]bool{},
		started: map[string]bool{},
	}
}

// SetPodStatus records a pod's newly generated status. An unchanged
// status keeps its version and is not sent again.
func (m *Manager) SetPodStatus(pod *v1.Pod, status v1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setLocked(pod, status)
}

func (m *Manager) setLocked(pod *v1.Pod, status v1.PodStatus) {
	e := m.pods[pod.UID]
	if e == nil {
		e = &entry{}
		m.pods[pod.UID] = e
	}
	e.pod = pod
	if e.version > 0 && equality.Semantic.DeepEqual(e.status, status) {
		return
	}
	e.status = status
	e.version++
	m.poke()
}

func (m *Manager) poke() {
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

// GetPodStatus returns the pod's latest status and whether there is one.
// The status is a deep copy.
func (m *Manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[uid]
	if e == nil {
		return v1.PodStatus{}, false
	}
	return *e.status.DeepCopy(), true
}

// Version returns the pod's status version (0 when unknown).
func (m *Manager) Version(uid types.UID) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.pods[uid]; e != nil {
		return e.version
	}
	return 0
}

// Pods returns every pod the Manager knows, with its latest status, in
// namespace/name order. The pods are copies.
func (m *Manager) Pods() []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*v1.Pod, 0, len(m.pods))
	for _, e := range m.pods {
		p := e.pod.DeepCopy()
		p.Status = *e.status.DeepCopy()
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// UIDs returns the UIDs of every pod the Manager knows.
func (m *Manager) UIDs() []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]types.UID, 0, len(m.pods))
	for uid := range m.pods {
		out = append(out, uid)
	}
	return out
}

// RemovePod forgets a pod and its probe verdicts.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.pods[uid]; e != nil {
		for _, list := range [][]v1.ContainerStatus{e.status.ContainerStatuses, e.status.InitContainerStatuses} {
			for _, c := range list {
				delete(m.ready, c.ContainerID)
				delete(m.started, c.ContainerID)
			}
		}
	}
	delete(m.pods, uid)
}

// SetContainerReadiness records a readiness probe verdict and updates the
// container's ready field and the pod's ContainersReady and Ready
// conditions at once.
func (m *Manager) SetContainerReadiness(uid types.UID, containerID string, ready bool) {
	m.setVerdict(uid, containerID, ready, m.ready)
}

// SetContainerStartup records a startup probe verdict and updates the
// container's started field.
func (m *Manager) SetContainerStartup(uid types.UID, containerID string, started bool) {
	m.setVerdict(uid, containerID, started, m.started)
}

func (m *Manager) setVerdict(uid types.UID, containerID string, v bool, into map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := into[containerID]; ok && old == v {
		return
	}
	into[containerID] = v
	e := m.pods[uid]
	if e == nil {
		return
	}
	s := *e.status.DeepCopy()
	changed := false
	for _, list := range [][]v1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses} {
		for i := range list {
			c := &list[i]
			if c.ContainerID != containerID || c.State.Running == nil {
				continue
			}
			changed = true
			started := c.Started != nil && *c.Started
			if sv, ok := m.started[containerID]; ok {
				started = sv
				c.Started = &started
			}
			ready := started
			if rv, ok := m.ready[containerID]; ok {
				ready = started && rv
			}
			c.Ready = ready
		}
	}
	if !changed {
		return
	}
	updateReadyConditions(e.pod, &s, metav1.NewTime(m.cfg.Clock.Now()))
	m.setLocked(e.pod, s)
}

// VerdictsFor returns the readiness and startup verdicts of the given
// containers ("type://id"), for Generate; containers without a verdict
// are left out.
func (m *Manager) VerdictsFor(ids []string) (ready, started map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ready, started = make(map[string]bool, len(ids)), make(map[string]bool, len(ids))
	for _, id := range ids {
		if v, ok := m.ready[id]; ok {
			ready[id] = v
		}
		if v, ok := m.started[id]; ok {
			started[id] = v
		}
	}
	return ready, started
}

// updateReadyConditions recomputes ContainersReady and Ready.
func updateReadyConditions(pod *v1.Pod, s *v1.PodStatus, now metav1.Time) {
	all := len(s.ContainerStatuses) > 0
	for _, c := range s.ContainerStatuses {
		all = all && c.Ready
	}
	terminal := s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed
	set := func(t v1.PodConditionType, ok bool, reason string) {
		for i := range s.Conditions {
			c := &s.Conditions[i]
			if c.Type != t {
				continue
			}
			want := v1.ConditionFalse
			if ok {
				want, reason = v1.ConditionTrue, ""
			}
			if c.Status != want {
				c.Status, c.LastTransitionTime = want, now
			}
			c.Reason = reason
		}
	}
	set(v1.ContainersReady, all && !terminal, "ContainersNotReady")
	set(v1.PodReady, all && !terminal && gatesPass(pod), readyReason(all, terminal))
}

// Run pushes every status change to the sink until ctx ends. Changes
// that arrive while a push is under way coalesce: only the newest status
// of a pod is sent. A failed push is retried after RetryPeriod. Without a
// sink Run only waits for ctx.
func (m *Manager) Run(ctx context.Context) error {
	retry := m.cfg.Clock.NewTicker(m.cfg.RetryPeriod)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.notify:
		case <-retry.C():
		}
		if m.cfg.Sink != nil {
			m.flush(ctx)
		}
	}
}

func (m *Manager) flush(ctx context.Context) {
	type job struct {
		uid     types.UID
		pod     *v1.Pod
		status  v1.PodStatus
		version uint64
	}
	m.mu.Lock()
	var jobs []job
	for uid, e := range m.pods {
		if e.sent != e.version {
			jobs = append(jobs, job{uid, e.pod, *e.status.DeepCopy(), e.version})
		}
	}
	m.mu.Unlock()
	for _, j := range jobs {
		if err := m.cfg.Sink.UpdatePodStatus(ctx, j.pod, j.status); err != nil {
			if !errors.Is(err, context.Canceled) {
				m.cfg.Logger.Error(err, "updating pod status", "pod", j.pod.Namespace+"/"+j.pod.Name, "podUID", j.uid)
			}
			continue
		}
		m.mu.Lock()
		if e := m.pods[j.uid]; e != nil && e.sent < j.version {
			e.sent = j.version
		}
		m.mu.Unlock()
	}
}

// MemorySink keeps the last status it received per pod. It is safe for
// concurrent use.
type MemorySink struct {
	mu       sync.Mutex
	statuses map[types.UID]v1.PodStatus
	updates  int
}

// UpdatePodStatus implements Sink.
func (s *MemorySink) UpdatePodStatus(_ context.Context, pod *v1.Pod, status v1.PodStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statuses == nil {
		s.statuses = map[types.UID]v1.PodStatus{}
	}
	s.statuses[pod.UID] = status
	s.updates++
	return nil
}

// Get returns the last status received for a pod.
func (s *MemorySink) Get(uid types.UID) (v1.PodStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.statuses[uid]
	return st, ok
}

// Updates counts the statuses received.
func (s *MemorySink) Updates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates
}
