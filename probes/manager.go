package probes

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// Update is a change of a container's probe result.
type Update struct {
	PodUID types.UID
	// ContainerID is "type://id", as in the pod status.
	ContainerID string
	Container   string
	Type        Type
	Result      Result
}

// StatusGetter returns a pod's current API status (status.Manager has
// one): the probes find each container's ID, state and start time there.
type StatusGetter func(uid types.UID) (v1.PodStatus, bool)

// EventFunc receives the probes' events (Unhealthy, ProbeWarning). It is
// an alias of runtime.EventFunc: it must not block.
type EventFunc = runtime.EventFunc

// Config configures a Manager.
type Config struct {
	// Prober runs probes. Default: &Handlers{} (exec probes then fail).
	Prober Prober
	// Status gives the pods' statuses. Required.
	Status StatusGetter
	// UpdateBuffer is the Updates channel's capacity. Default 1000. When
	// it is full, workers wait for the reader.
	UpdateBuffer int
	Clock        clock.Clock
	Logger       logr.Logger
	Events       EventFunc
	// Registerer receives prober_probe_total and
	// prober_probe_duration_seconds. Nil: not registered.
	Registerer prometheus.Registerer
	// Jitter returns the delay before a worker's first probe, given the
	// period. Default: uniformly random in [0, period), so a thousand
	// pods do not probe in lock step.
	Jitter func(period time.Duration) time.Duration
}

// Manager runs the probes of the pods it is given: one goroutine per
// container per probe type, no more. Results are kept (Liveness,
// Readiness, Startup) and every change is sent on Updates. Methods are
// safe for concurrent use.
type Manager struct {
	cfg     Config
	updates chan Update
	metrics *metrics

	// mu guards everything below.
	mu      sync.Mutex
	ctx     context.Context
	wg      sync.WaitGroup
	workers map[workerKey]*worker
	results map[string]map[Type]Result // container ID → type → result
}

type workerKey struct {
	pod       types.UID
	container string
	typ       Type
}

// New returns a Manager; it starts nothing until Run.
func New(cfg Config) (*Manager, error) {
	if cfg.Status == nil {
		return nil, errors.New("probes: Config.Status is required")
	}
	if cfg.Prober == nil {
		cfg.Prober = &Handlers{}
	}
	if cfg.UpdateBuffer <= 0 {
		cfg.UpdateBuffer = 1000
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
	if cfg.Jitter == nil {
		cfg.Jitter = func(p time.Duration) time.Duration {
			if p <= 0 {
				return 0
			}
			return rand.N(p)
		}
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, updates: make(chan Update, cfg.UpdateBuffer), metrics: m,
		workers: map[workerKey]*worker{}, results: map[string]map[Type]Result{}}, nil
}

// Updates returns the channel of result changes. It is never closed.
func (m *Manager) Updates() <-chan Update { return m.updates }

// Run starts the workers of the pods added so far, and of those added
// later, until ctx ends; then it waits for every worker to stop.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	m.ctx = ctx
	for _, w := range m.workers {
		m.startLocked(w)
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.ctx = nil
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// AddPod starts workers for the probes of the pod's containers and
// sidecars that have none yet. It is cheap to call on every sync.
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	add := func(c *v1.Container) {
		for _, tp := range [...]struct {
			typ Type
			p   *v1.Probe
		}{{Liveness, c.LivenessProbe}, {Readiness, c.ReadinessProbe}, {Startup, c.StartupProbe}} {
			typ, p := tp.typ, tp.p
			if p == nil {
				continue
			}
			key := workerKey{pod.UID, c.Name, typ}
			if w := m.workers[key]; w != nil {
				w.setPod(pod)
				continue
			}
			w := newWorker(m, pod, c, typ, p)
			m.workers[key] = w
			m.warnLocked(pod, c, typ, p)
			if m.ctx != nil {
				m.startLocked(w)
			}
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
}

// warnLocked reports probe settings that cannot work as written.
func (m *Manager) warnLocked(pod *v1.Pod, c *v1.Container, typ Type, p *v1.Probe) {
	var problems []string
	switch handlerCount(p) {
	case 0:
		problems = append(problems, "it has no handler")
	case 1:
	default:
		problems = append(problems, "it has more than one handler")
	}
	if p.TimeoutSeconds > 0 && p.PeriodSeconds > 0 && p.TimeoutSeconds > p.PeriodSeconds {
		problems = append(problems, fmt.Sprintf("its timeout (%ds) is longer than its period (%ds); the next probe waits for the last", p.TimeoutSeconds, p.PeriodSeconds))
	}
	if len(problems) > 0 {
		m.cfg.Events(pod, v1.EventTypeWarning, "ProbeWarning", fmt.Sprintf("%s probe of container %s: %s", typ, c.Name, strings.Join(problems, "; ")))
	}
}

func (m *Manager) startLocked(w *worker) {
	if w.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(m.ctx)
	w.stop = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		if w.run(ctx) {
			m.retire(w)
		}
	}()
}

// retire records that a worker stopped by its own rules and forgets its
// result, as the kubelet's worker does when it exits. The worker stays
// known, so AddPod does not start it again; RemovePod and CleanupPods
// forget it.
func (m *Manager) retire(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.workers[workerKey{w.podUID, w.container.Name, w.typ}] != w {
		return // removed meanwhile
	}
	w.retired = true
	if byType := m.results[w.currentID()]; byType != nil {
		delete(byType, w.typ)
	}
}

// RemovePod stops the pod's workers and forgets their results.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, w := range m.workers {
		if key.pod == uid {
			if w.stop != nil {
				w.stop()
			}
			delete(m.workers, key)
			delete(m.results, w.currentID())
		}
	}
}

// StopLivenessAndStartup stops the pod's liveness and startup workers and
// forgets their results, and leaves its readiness workers running, as the
// kubelet does before it kills a pod: a container is not restarted for a
// failed liveness probe while it is being stopped, and readiness still
// turns the pod NotReady during the grace period. RemovePod stops the
// rest once the pod's containers are gone; AddPod does not start the
// stopped workers again.
func (m *Manager) StopLivenessAndStartup(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, w := range m.workers {
		if key.pod == uid && (key.typ == Liveness || key.typ == Startup) && !w.retired {
			if w.stop != nil {
				w.stop()
			}
			w.retired = true // known, so AddPod does not start it again
			if byType := m.results[w.currentID()]; byType != nil {
				delete(byType, key.typ)
			}
		}
	}
}

// Trigger asks the pod's worker of the container's probe of type typ to
// probe now rather than at its next period, as the kubelet's status
// update does for a started container that is not ready: its rules
// (initial delay, startup gate, hold) still apply, and its period's grid
// does not move. It never blocks: a trigger while one is pending is
// merged into it, and one for a worker that does not exist, or has
// stopped, is dropped. It reports whether a worker took it.
func (m *Manager) Trigger(uid types.UID, container string, typ Type) bool {
	m.mu.Lock()
	w := m.workers[workerKey{uid, container, typ}]
	live := w != nil && !w.retired
	m.mu.Unlock()
	if !live {
		return false
	}
	select {
	case w.trigger <- struct{}{}:
	default:
	}
	return true
}

// CleanupPods stops the workers of pods not in keep.
func (m *Manager) CleanupPods(keep map[types.UID]bool) {
	m.mu.Lock()
	var gone []types.UID
	for key := range m.workers {
		if !keep[key.pod] {
			gone = append(gone, key.pod)
		}
	}
	m.mu.Unlock()
	for _, uid := range gone {
		m.RemovePod(uid)
	}
}

// Workers returns how many probe workers exist and have not stopped by
// their own rules; while Run runs, each has one goroutine.
func (m *Manager) Workers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, w := range m.workers {
		if !w.retired {
			n++
		}
	}
	return n
}

// Liveness, Readiness and Startup return a container's latest result
// ("type://id"): Unknown when it has no such probe result yet.
func (m *Manager) Liveness(containerID string) Result  { return m.result(containerID, Liveness) }
func (m *Manager) Readiness(containerID string) Result { return m.result(containerID, Readiness) }
func (m *Manager) Startup(containerID string) Result   { return m.result(containerID, Startup) }

func (m *Manager) result(containerID string, typ Type) Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.results[containerID][typ]
}

// started reports whether a worker's container is past its startup
// probe, as the kubelet decides it: the startup result when there is one;
// without one, not while a startup worker runs for the container, and yes
// when there is none or it stopped (a worker that stops on deletion
// leaves Success behind and then forgets it).
func (m *Manager) started(w *worker, containerID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.results[containerID][Startup]; ok {
		return r == Success
	}
	sw := m.workers[workerKey{w.podUID, w.container.Name, Startup}]
	return sw == nil || sw.retired
}

// set records a result and sends an Update when it changed.
func (m *Manager) set(ctx context.Context, w *worker, containerID string, r Result) {
	m.mu.Lock()
	byType := m.results[containerID]
	if byType == nil {
		byType = map[Type]Result{}
		m.results[containerID] = byType
	}
	changed := byType[w.typ] != r
	byType[w.typ] = r
	m.mu.Unlock()
	if !changed {
		return
	}
	u := Update{PodUID: w.podUID, ContainerID: containerID, Container: w.container.Name, Type: w.typ, Result: r}
	select {
	case m.updates <- u:
	case <-ctx.Done():
	}
}

func (m *Manager) forget(containerID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.results, containerID)
}
