package status

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/podutil"
)

// Sink is where pod statuses go: memory, a callback, an API server. It
// is called from Manager.Run and Manager.Flush, one call at a time, with
// the pod's status current when the call starts (its terminal phase held
// back while Config.CouldHaveRunningContainers says so); an error makes
// the Manager try again later. It must honour ctx, and must not call the
// Manager's Flush.
type Sink interface {
	UpdatePodStatus(ctx context.Context, pod *v1.Pod, status v1.PodStatus) error
}

// Reconciler is a Sink that can tell whether a pod's status as its store
// has it (an API server's, from a watch) needs the status the Manager
// holds written again: another writer changed it.
// Manager.Reconcile asks it; kube.StatusSink is one.
type Reconciler interface {
	Sink
	NeedsReconcile(pod *v1.Pod, status v1.PodStatus) bool
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
	// RetryPeriod is how soon a status the sink refused is first sent
	// again; each further failure in a row doubles the wait, up to
	// MaxRetryPeriod. Default 10s.
	RetryPeriod time.Duration
	// MaxRetryPeriod caps the retry back-off. Default 2 minutes (and
	// never less than RetryPeriod).
	MaxRetryPeriod time.Duration
	// Clock drives retries and transition times. Default: the real clock.
	Clock clock.WithTicker
	// Logger logs sink failures. Default: discard.
	Logger logr.Logger
	// CouldHaveRunningContainers reports whether a pod's containers may
	// still run: its worker has not yet stopped it for good (the
	// kubelet's PodDeletionSafetyProvider; agent.Agent passes its pod
	// workers' view). While it reports true, a terminal phase is held
	// back from the sink, as the kubelet's status manager holds it back
	// from the API server, so nothing outside the node takes the pod for
	// finished (and, say, starts its replacement) while it may still use
	// what it holds: the sink gets the status with the phase, reason and
	// message it last accepted (before its first: the pod's own, the API
	// server's, or Pending when that has none) and without a
	// DisruptionTarget condition. The status goes whole at its next
	// change, Resend or Flush once the function reports false. It is
	// called without the Manager's lock but with its sink's turn held, so
	// it must not call Flush. Default nil: nothing is held back.
	CouldHaveRunningContainers func(types.UID) bool
}

// Manager keeps the latest status of every pod with a version that grows
// on every change, merges the probes' readiness and startup verdicts into
// it, pushes changes to its Sink, and tells subscribers that something
// changed. Methods are safe for concurrent use.
type Manager struct {
	cfg    Config
	notify chan struct{} // capacity 1: "something is dirty"

	// pushTurn (capacity 1) makes the sink's calls one at a time, from
	// Run and Flush; a Flush waits for its turn only as long as its ctx.
	pushTurn chan struct{}
	// flushFailed (capacity 1) has Run arm its retry after a Flush that
	// failed.
	flushFailed chan struct{}

	terminated *prometheus.CounterVec

	// mu guards everything below.
	mu      sync.Mutex
	pods    map[types.UID]*entry
	ready   map[string]bool // container ID → readiness verdict
	started map[string]bool // container ID → startup verdict
	subs    map[*subscriber]struct{}
	// scratch holds the two encodings sameStatusLocked compares, so that a
	// resync of an unchanged pod encodes without allocating.
	scratch []byte
}

type entry struct {
	pod     *v1.Pod
	status  v1.PodStatus
	version uint64
	sent    uint64 // the version the sink accepted
	// What the sink last accepted of the phase, whether it accepted
	// anything, and whether that status was held back
	// (Config.CouldHaveRunningContainers).
	sentPhase               v1.PodPhase
	sentReason, sentMessage string
	accepted, held          bool
	// resends counts the Resend calls, so that a push that got its
	// status held back sees one made while it was under way.
	resends uint64
	// reconciled is when Reconcile last had the status sent again;
	// reconcile, that it found the sink's store differing since, within
	// ReconcileInterval of that.
	reconciled time.Time
	reconcile  bool
	// verdicts holds the IDs of this pod's containers that have a
	// readiness or startup verdict, so that pruning them costs the
	// pod's containers, not every verdict of the node.
	verdicts map[string]struct{}
}

type subscriber struct {
	ch chan struct{} // capacity 1: "something changed since you last looked"
}

// New returns a Manager. It starts nothing; call Run to push to the sink.
func New(cfg Config) *Manager {
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = 10 * time.Second
	}
	if cfg.MaxRetryPeriod <= 0 {
		cfg.MaxRetryPeriod = 2 * time.Minute
	}
	if cfg.MaxRetryPeriod < cfg.RetryPeriod {
		cfg.MaxRetryPeriod = cfg.RetryPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &Manager{
		terminated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "terminated_containers_total", Help: "Cumulative number of container terminations.",
		}, []string{"container_type", "exit_code", "reason"}),
		cfg:         cfg,
		notify:      make(chan struct{}, 1),
		pushTurn:    make(chan struct{}, 1),
		flushFailed: make(chan struct{}, 1),
		pods:        map[types.UID]*entry{},
		ready:       map[string]bool{},
		started:     map[string]bool{},
		subs:        map[*subscriber]struct{}{},
	}
}

// SetPodStatus records a pod's newly generated status as the kubelet's
// status manager does: its start time is the last status's (else the
// pod's own), or the clock's now when neither has one; it is normalized
// (times in whole seconds, terminated containers' messages cut to their
// share of MaxTerminationMessagesLength, regular and ephemeral container
// statuses in name order); its observed generation never goes below the
// last one's; a status that shows a container that ended, and that
// nothing restarts, as no longer terminated is dropped, logged as an
// error (checkContainerStateTransition). A status unchanged by then,
// other components' conditions aside (those neither OwnedByKubelet nor
// DisruptionTarget), keeps its version and is not sent again, and the
// Manager keeps the last one whole; a changed one is kept as a
// copy, so the caller may reuse what it passed, and drops the probe
// verdicts of the pod's containers that it no longer shows, or shows
// terminated: they can never count again.
func (m *Manager) SetPodStatus(pod *v1.Pod, status v1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setLocked(pod, status)
}

func (m *Manager) setLocked(pod *v1.Pod, status v1.PodStatus) {
	e := m.pods[pod.UID]
	// The status to compare with: the last one, else the pod's own (the
	// API server's), as the kubelet's status manager does.
	old := &pod.Status
	if e != nil {
		old = &e.status
	}
	// The start time never changes once set, and a status without one
	// (a rejection's) gets the time it is first recorded.
	if old.StartTime != nil && !old.StartTime.IsZero() {
		status.StartTime = old.StartTime
	} else if status.StartTime == nil || status.StartTime.IsZero() {
		t := metav1.NewTime(m.cfg.Clock.Now())
		status.StartTime = &t
	}
	status = normalize(pod, status)
	if old.ObservedGeneration > status.ObservedGeneration {
		// A status made from an older spec does not take the observed
		// generation back.
		status.ObservedGeneration = old.ObservedGeneration
	}
	if e != nil && m.sameStatusLocked(ownedPart(&e.status), ownedPart(&status)) {
		// Other components' conditions alone make no new status, as in
		// the kubelet's status manager: the sink keeps the API's anyway.
		e.pod = pod
		m.reconcileLocked(e)
		return
	}
	if err := checkContainerStateTransition(old, &status, &pod.Spec); err != nil {
		// Dropped whole: the Manager keeps what it had, pod included.
		m.cfg.Logger.Error(err, "status update on pod aborted", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID)
		return
	}
	if e == nil {
		e = &entry{}
		m.pods[pod.UID] = e
	}
	e.pod = pod
	m.countTerminations(old, &status)
	// Kept as a copy of its own, so that the caller's later changes never
	// reach it, as the kubelet's status manager copies the status it is
	// given (normalize shares what it leaves as it was).
	e.status = *status.DeepCopy()
	e.version++
	e.reconcile = false // the whole status goes
	m.pruneLocked(e)
	m.poke()
	m.signalLocked()
}

var _ prometheus.Collector = (*Manager)(nil)

// Describe implements prometheus.Collector: the Manager's metric is the
// kubelet's kubelet_terminated_containers_total, labelled container_type
// (container, init_container, ephemeral_container), exit_code and
// reason, counting each termination once, as a recorded status first
// shows it (a container that restarted and ended again between two
// recorded statuses counts once, as with the kubelet). Register the
// Manager on a registry to export it (agent.Agent does).
func (m *Manager) Describe(ch chan<- *prometheus.Desc) { m.terminated.Describe(ch) }

// Collect implements prometheus.Collector.
func (m *Manager) Collect(ch chan<- prometheus.Metric) { m.terminated.Collect(ch) }

// countTerminations counts the containers st shows terminated that old
// did not, as the kubelet's status manager does.
func (m *Manager) countTerminations(old, st *v1.PodStatus) {
	for _, kind := range [...]struct {
		label    string
		old, new []v1.ContainerStatus
	}{
		{"init_container", old.InitContainerStatuses, st.InitContainerStatuses},
		{"container", old.ContainerStatuses, st.ContainerStatuses},
		{"ephemeral_container", old.EphemeralContainerStatuses, st.EphemeralContainerStatuses},
	} {
	statuses:
		for i := range kind.new {
			t := kind.new[i].State.Terminated
			if t == nil {
				continue
			}
			for j := range kind.old {
				if kind.old[j].Name == kind.new[i].Name {
					if kind.old[j].State.Terminated != nil {
						continue statuses
					}
					break
				}
			}
			m.terminated.WithLabelValues(kind.label, strconv.Itoa(int(t.ExitCode)), t.Reason).Inc()
		}
	}
}

// checkContainerStateTransition refuses a status in which a container
// the previous status showed terminated is no longer terminated, though
// it is not to restart, as the kubelet's status manager refuses it: that
// is a fault in what made the status, never a change to report. Pods
// with restartPolicy Always, and pods with a RestartAllContainers rule,
// may restart any container; sidecars always restart; a container with
// a non-zero exit code in an OnFailure pod, or one its restart policy or
// rules restart (podutil.ContainerShouldRestart), may too. As in the
// kubelet, init container statuses go with the spec's init containers by
// position, and a previous status whose init containers do not match
// the spec's is refused too.
func checkContainerStateTransition(old, st *v1.PodStatus, spec *v1.PodSpec) error {
	if spec.RestartPolicy == v1.RestartPolicyAlways || podutil.MayRestartAllContainers(spec) {
		return nil
	}
	// stays reports whether a container that ended with t is to stay so.
	stays := func(c *v1.Container, t *v1.ContainerStateTerminated) bool {
		if t.ExitCode != 0 && spec.RestartPolicy == v1.RestartPolicyOnFailure {
			return false
		}
		return c == nil || !podutil.ContainerShouldRestart(c, spec, t.ExitCode)
	}
	revived := func(list []v1.ContainerStatus, name string) bool {
		for i := range list {
			if list[i].Name == name && list[i].State.Terminated == nil {
				return true
			}
		}
		return false
	}
	for i := range old.ContainerStatuses {
		o := &old.ContainerStatuses[i]
		if t := o.State.Terminated; t != nil && stays(containerNamed(spec.Containers, o.Name), t) && revived(st.ContainerStatuses, o.Name) {
			return fmt.Errorf("terminated container %s attempted illegal transition to non-terminated state", o.Name)
		}
	}
	for i := range old.InitContainerStatuses {
		o := &old.InitContainerStatuses[i]
		if i >= len(spec.InitContainers) || spec.InitContainers[i].Name != o.Name {
			return fmt.Errorf("found mismatch between pod spec and status, container: %s", o.Name)
		}
		if t := o.State.Terminated; t != nil && stays(&spec.InitContainers[i], t) && revived(st.InitContainerStatuses, o.Name) {
			return fmt.Errorf("terminated init container %s attempted illegal transition to non-terminated state", o.Name)
		}
	}
	return nil
}

// containerNamed returns the container of list named name, or nil.
func containerNamed(list []v1.Container, name string) *v1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// ownedPart is s without other components' conditions (those neither
// OwnedByKubelet nor DisruptionTarget): s itself when it has none, else
// a shallow copy.
func ownedPart(s *v1.PodStatus) *v1.PodStatus {
	others := func(c v1.PodCondition) bool { return !OwnedByKubelet(c.Type) && c.Type != v1.DisruptionTarget }
	if !slices.ContainsFunc(s.Conditions, others) {
		return s
	}
	c := *s
	c.Conditions = slices.DeleteFunc(slices.Clone(s.Conditions), others)
	return &c
}

// maxScratch bounds the encoding memory the Manager keeps between
// comparisons; a larger status is encoded in memory of its own.
const maxScratch = 256 << 10

// sameStatusLocked reports whether two normalized statuses are
// semantically equal (equality.Semantic), the test for a change worth a
// new version. Equal protobuf encodings settle it: the generated
// marshalers write every field, maps in key order, times in seconds
// (normalized statuses have no more), and quantities in canonical form,
// so equal bytes mean equal statuses. That costs about a fifteenth of the
// reflective comparison, which was most of a resync of an unchanged pod
// (BenchmarkSetPodStatusUnchanged), and is made in m.scratch. The
// reflective comparison is kept for the statuses whose encodings differ,
// such as a quantity written in another format.
func (m *Manager) sameStatusLocked(a, b *v1.PodStatus) bool {
	na, nb := a.Size(), b.Size()
	if na == nb {
		buf := m.scratch
		if cap(buf) < na+nb {
			buf = make([]byte, na+nb)
		}
		buf = buf[:na+nb]
		_, errA := a.MarshalToSizedBuffer(buf[:na])
		_, errB := b.MarshalToSizedBuffer(buf[na:])
		if len(buf) <= maxScratch {
			m.scratch = buf
		}
		if errA == nil && errB == nil && bytes.Equal(buf[:na], buf[na:]) {
			return true
		}
	}
	return equality.Semantic.DeepEqual(*a, *b)
}

// pruneLocked drops the verdicts of e's containers that its status no
// longer shows, or shows terminated.
func (m *Manager) pruneLocked(e *entry) {
	if len(e.verdicts) == 0 {
		return
	}
	for id := range e.verdicts {
		if !live(&e.status, id) {
			delete(m.ready, id)
			delete(m.started, id)
			delete(e.verdicts, id)
		}
	}
}

// live reports whether s shows the container id, not terminated.
func live(s *v1.PodStatus, id string) bool {
	for _, list := range [][]v1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].ContainerID == id {
				return list[i].State.Terminated == nil
			}
		}
	}
	return false
}

// signalLocked tells every subscriber, without blocking, that something
// changed; a subscriber that has not looked since the last signal keeps
// one pending signal.
func (m *Manager) signalLocked() {
	for s := range m.subs {
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
}

// Subscribe returns a channel that receives a value whenever a pod's
// status changes (its version grows, including a pod's first status) or
// a pod is removed, and a cancel function. The channel has capacity 1 and
// is sent to without blocking, so changes coalesce: however many happen
// before the receiver looks, one value is pending, and the receiver then
// reads the current state (Pods, GetPodStatus). No goroutine is started
// per subscriber; a subscriber that never reads costs nothing but its
// channel. cancel unregisters and closes the channel (a pending value is
// still received first); it may be called more than once and from any
// goroutine. Subscribe is safe for concurrent use.
func (m *Manager) Subscribe() (changes <-chan struct{}, cancel func()) {
	s := &subscriber{ch: make(chan struct{}, 1)}
	m.mu.Lock()
	m.subs[s] = struct{}{}
	m.mu.Unlock()
	return s.ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.subs[s]; ok {
			delete(m.subs, s)
			close(s.ch)
		}
	}
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

// PeekPodStatus returns the pod's latest status as GetPodStatus does, but
// without copying it: the result shares its slices, maps and pointers
// with the Manager. The Manager never writes a status once it has
// recorded it (a change records a new one), so the result stays as it was
// however the pod's status changes later; the caller must not modify it.
// It is for a reader that only looks, as a status generation does with
// the previous status on every sync; GetPodStatus gives one to own.
func (m *Manager) PeekPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[uid]
	if e == nil {
		return v1.PodStatus{}, false
	}
	return e.status, true
}

// StartTime returns the start time of the pod's latest status: nil when
// the Manager has no status of the pod or the status has none. It copies
// only the time, so it is cheap to call often. The result belongs to the
// caller.
func (m *Manager) StartTime(uid types.UID) *metav1.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[uid]
	if e == nil || e.status.StartTime == nil {
		return nil
	}
	t := *e.status.StartTime
	return &t
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

// Range calls f with each known pod's UID and latest status, in no
// particular order, until f returns false. It holds the Manager's lock
// while it runs: f must be quick, must not call the Manager, and must
// neither modify status nor keep it after it returns (copy what it
// keeps). It lets a reader count or copy only what it needs, where Pods
// copies every pod whole.
func (m *Manager) Range(f func(uid types.UID, status *v1.PodStatus) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, e := range m.pods {
		if !f(uid, &e.status) {
			return
		}
	}
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

// RemovePod forgets a pod and its probe verdicts, and signals the
// subscribers if the pod was known.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[uid]
	if e == nil {
		return
	}
	for id := range e.verdicts {
		delete(m.ready, id)
		delete(m.started, id)
	}
	delete(m.pods, uid)
	m.signalLocked()
}

// SetContainerReadiness records a readiness probe verdict and updates the
// container's ready field and the pod's ContainersReady and Ready
// conditions at once. A verdict for a pod the Manager does not know, or
// for a container its status does not show or shows terminated, is
// dropped: it could never count.
func (m *Manager) SetContainerReadiness(uid types.UID, containerID string, ready bool) {
	m.setVerdict(uid, containerID, ready, m.ready)
}

// SetContainerStartup records a startup probe verdict and updates the
// container's started field. Verdicts are dropped as by
// SetContainerReadiness.
func (m *Manager) SetContainerStartup(uid types.UID, containerID string, started bool) {
	m.setVerdict(uid, containerID, started, m.started)
}

func (m *Manager) setVerdict(uid types.UID, containerID string, v bool, into map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[uid]
	if e == nil || !live(&e.status, containerID) {
		return
	}
	if old, ok := into[containerID]; ok && old == v {
		return
	}
	into[containerID] = v
	if e.verdicts == nil {
		e.verdicts = map[string]struct{}{}
	}
	e.verdicts[containerID] = struct{}{}
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

// updateReadyConditions recomputes ContainersReady and Ready by the
// rules Generate uses (sidecars' readiness counts, as the kubelet's does),
// updating the conditions the status already has.
func updateReadyConditions(pod *v1.Pod, s *v1.PodStatus, now metav1.Time) {
	containersReady := containersReadyCondition(pod, s)
	for _, want := range [...]v1.PodCondition{containersReady, readyCondition(pod, containersReady)} {
		for i := range s.Conditions {
			c := &s.Conditions[i]
			if c.Type != want.Type {
				continue
			}
			if c.Status != want.Status {
				c.Status, c.LastTransitionTime = want.Status, now
			}
			c.Reason, c.Message = want.Reason, want.Message
		}
	}
}

// Run pushes every status change to the sink until ctx ends. Changes
// that arrive while a push is under way coalesce: only the newest status
// of a pod is sent. A failed push is retried after RetryPeriod, then
// after twice as long for each further failure in a row, up to
// MaxRetryPeriod; any change also pushes every pod still unsent at once.
// Run arms a timer only while a push has failed: with nothing to push it
// waits without waking. Without a sink Run only waits for ctx.
func (m *Manager) Run(ctx context.Context) error {
	if m.cfg.Sink == nil {
		<-ctx.Done()
		return nil
	}
	var (
		retry   clock.Timer
		retryC  <-chan time.Time // nil while no retry is due
		backoff time.Duration
	)
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	arm := func() {
		switch {
		case backoff == 0:
			backoff = m.cfg.RetryPeriod
		case backoff < m.cfg.MaxRetryPeriod:
			backoff = min(2*backoff, m.cfg.MaxRetryPeriod)
		}
		retry = m.cfg.Clock.NewTimer(backoff)
		retryC = retry.C()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.notify:
		case <-retryC:
			retryC = nil
		case <-m.flushFailed:
			// Its pod is unsent again, and tried with the back-off.
			if retryC == nil {
				arm()
			}
			continue
		}
		if m.flush(ctx) {
			if retryC != nil {
				retry.Stop()
				retryC = nil
			}
			backoff = 0
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if retryC != nil {
			continue // a retry is already due; a change does not postpone it
		}
		arm()
	}
}

// flush pushes every status the sink does not have yet, and reports
// whether all of them were accepted.
func (m *Manager) flush(ctx context.Context) bool {
	m.mu.Lock()
	var uids []types.UID
	for uid, e := range m.pods {
		if e.sent != e.version {
			uids = append(uids, uid)
		}
	}
	m.mu.Unlock()
	ok := true
	for _, uid := range uids {
		if err := m.push(ctx, uid, false); err != nil {
			ok = false
		}
	}
	return ok
}

// Flush sends the pod's status to the sink now, in the caller's
// goroutine, unless the sink has it already; a status the sink got held
// back (Config.CouldHaveRunningContainers) is sent again, whole if the
// pod can no longer have running containers. It waits for a sink call
// under way to end, as long as ctx allows. It returns the sink's error,
// or ctx's (nil without a sink or a status); the pod's status is then
// tried again by Run after its back-off. The agent flushes a pod's final
// status before it tells Config.PodTerminated, as the kubelet's status
// manager writes the final status before it deletes the pod.
func (m *Manager) Flush(ctx context.Context, uid types.UID) error {
	if m.cfg.Sink == nil {
		return nil
	}
	err := m.push(ctx, uid, true)
	if err != nil {
		select {
		case m.flushFailed <- struct{}{}:
		default:
		}
	}
	return err
}

// Resend has Run send the pod's status again if the sink got it held
// back, so that it goes whole once the pod can no longer have running
// containers; it does not wait. The agent calls it as a pod's worker
// has stopped the pod, as the kubelet's status manager sends the final
// status of a pod then (TerminatePod). One made while a sink call is
// under way is not lost if that call's status gets held back: it is sent
// again once the call ends.
func (m *Manager) Resend(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[uid]
	if e == nil {
		return
	}
	e.resends++ // seen by a push under way (push)
	if e.held {
		e.sent = 0
		m.poke()
	}
}

// ReconcileInterval is how often at most Reconcile has a pod's status
// sent again, the kubelet status manager's period for comparing its
// statuses with the API server's: another writer that keeps changing a
// pod's status meets one write of the node's per interval, not a write
// war at the speed of a watch.
const ReconcileInterval = 10 * time.Second

// Reconcile is told of the pod as the sink's store now has it (pod.Status
// is the API server's, say, from a watch). When the sink is a Reconciler
// and finds that store's status differs from what it would write of the
// Manager's, the status is sent again, as the kubelet's status manager
// reconciles a status another writer changed: at once, or, within
// ReconcileInterval of the pod's last such write, at its first
// SetPodStatus after the interval (its periodic resync at the latest).
// A status still to be sent, or one the sink got held back, is left to
// its push; without a Reconciler nothing is done. NeedsReconcile is
// called without the Manager's lock.
func (m *Manager) Reconcile(pod *v1.Pod) {
	r, ok := m.cfg.Sink.(Reconciler)
	if !ok {
		return
	}
	m.mu.Lock()
	e := m.pods[pod.UID]
	if e == nil || e.sent != e.version || e.held {
		m.mu.Unlock()
		return
	}
	st, version := *e.status.DeepCopy(), e.version
	m.mu.Unlock()
	if !r.NeedsReconcile(pod, st) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pods[pod.UID] != e || e.sent != version {
		return
	}
	e.reconcile = true
	m.reconcileLocked(e)
}

// reconcileLocked sends e's status again if Reconcile asked for it and
// the pod's last reconciling write is ReconcileInterval ago.
func (m *Manager) reconcileLocked(e *entry) {
	if !e.reconcile {
		return // the common case, at every resync: no clock read
	}
	now := m.cfg.Clock.Now()
	if !e.reconciled.IsZero() && now.Sub(e.reconciled) < ReconcileInterval {
		return
	}
	e.reconcile, e.reconciled = false, now
	e.sent = 0
	m.poke()
}

// push sends the current status of uid to the sink unless it has that
// version already; resend sends it again when the sink got it held back.
// Sink calls are made one at a time, and each sends the status current
// when it starts, so the sink never gets an older status after a newer.
// A status the sink refuses, or that ctx ended the wait for, is left
// unsent.
func (m *Manager) push(ctx context.Context, uid types.UID, resend bool) error {
	select {
	case m.pushTurn <- struct{}{}:
	case <-ctx.Done():
		m.mu.Lock()
		if e := m.pods[uid]; e != nil {
			e.sent = 0 // a Flush's: unsent, for Run to try
		}
		m.mu.Unlock()
		return ctx.Err()
	}
	defer func() { <-m.pushTurn }()
	m.mu.Lock()
	e := m.pods[uid]
	if e == nil || (e.sent == e.version && !(resend && e.held)) {
		m.mu.Unlock()
		return nil
	}
	pod, st, version, resends := e.pod, *e.status.DeepCopy(), e.version, e.resends
	// The phase the sink has: the one it last accepted, else the pod's
	// own (the API server's), as the kubelet keeps the API's.
	phase, reason, message := e.sentPhase, e.sentReason, e.sentMessage
	if !e.accepted {
		phase, reason, message = pod.Status.Phase, pod.Status.Reason, pod.Status.Message
	}
	m.mu.Unlock()
	held := false
	if m.holdBack(uid, st.Phase, phase) {
		held = true
		if phase == "" {
			phase = v1.PodPending
		}
		st.Phase, st.Reason, st.Message = phase, reason, message
		st.Conditions = slices.DeleteFunc(st.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.DisruptionTarget })
	}
	err := m.cfg.Sink.UpdatePodStatus(ctx, pod, st)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pods[uid] != e {
		return err // forgotten, or recorded anew, meanwhile
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			m.cfg.Logger.Error(err, "updating pod status", "pod", pod.Namespace+"/"+pod.Name, "podUID", uid)
		}
		e.sent = 0
		return err
	}
	e.sent, e.held, e.accepted = version, held, true
	e.sentPhase, e.sentReason, e.sentMessage = st.Phase, st.Reason, st.Message
	if held && e.resends != resends {
		// Resend was called while the sink had this call: it asked for
		// the status to go again, which it could not see held then.
		e.sent = 0
		m.poke()
	}
	return nil
}

// holdBack reports whether a status of phase is to be held back from
// the sink, which last accepted sent: it turns the pod terminal while
// its containers may still run.
func (m *Manager) holdBack(uid types.UID, phase, sent v1.PodPhase) bool {
	return m.cfg.CouldHaveRunningContainers != nil && podutil.IsTerminal(phase) && !podutil.IsTerminal(sent) &&
		m.cfg.CouldHaveRunningContainers(uid)
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
