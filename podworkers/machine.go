package podworkers

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// MachineConfig configures a Machine. The zero value of each field is
// the documented default.
type MachineConfig struct {
	// ResyncInterval is how long after a successful sync a syncing pod
	// is due again. Default 1m, the kubelet's syncFrequency.
	ResyncInterval time.Duration
	// BackOffPeriod is how long after a first failed step the pod is due
	// again. Each further consecutive failure doubles it, up to
	// MaxBackOffPeriod; a success starts again from BackOffPeriod.
	// Default 10s, the kubelet's backOffPeriod.
	BackOffPeriod time.Duration
	// MaxBackOffPeriod caps the back-off. Default: BackOffPeriod, so that
	// every retry comes BackOffPeriod after a failure, as in the kubelet;
	// set it higher to back off further from a pod that keeps failing.
	// Never below BackOffPeriod.
	MaxBackOffPeriod time.Duration
}

func (c *MachineConfig) defaults() {
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = time.Minute
	}
	if c.BackOffPeriod <= 0 {
		c.BackOffPeriod = 10 * time.Second
	}
	if c.MaxBackOffPeriod <= 0 {
		c.MaxBackOffPeriod = c.BackOffPeriod
	}
	c.MaxBackOffPeriod = max(c.MaxBackOffPeriod, c.BackOffPeriod)
}

// Step is one call of the SyncHandler that a Machine asks for.
type Step struct {
	// State says which handler method runs: Syncing → SyncPod,
	// Terminating → SyncTerminatingPod (SyncTerminatingRuntimePod when
	// Pod is nil), Terminated → SyncTerminatedPod.
	State State
	UID   types.UID
	// UpdateType is the coalesced update's type, for SyncPod.
	UpdateType UpdateType
	// Pod is the latest spec; nil for a pod known only to the runtime.
	Pod *v1.Pod
	// RunningPod is the runtime's pod of an orphan (Pod nil).
	RunningPod *runtime.Pod
	// GracePeriod is the shortest grace period requested, in seconds, for
	// a terminating step.
	GracePeriod int64
	// StatusNewerThan is when the pod's previous step ended: the step
	// reads the status cache with GetNewerThan(StatusNewerThan), so it
	// never acts on a view that may predate its own last action.
	StatusNewerThan time.Time
}

// StepResult is how a step ended.
type StepResult struct {
	// Err is the step's error (a failed status read, a handler error, a
	// recovered panic); the step is retried after the back-off.
	Err error
	// Terminal: SyncPod found the pod in a terminal phase.
	Terminal bool
	// StatusUnread: the status could not be read, so the handler did not
	// run, and the next step keeps the same StatusNewerThan.
	StatusUnread bool
}

// UpdateEffect is what the driver must do after Machine.Update.
type UpdateEffect struct {
	// Ignored: the update changed nothing.
	Ignored bool
	// Created: the update created the pod's state; the driver starts the
	// pod's worker.
	Created bool
	// Cancel: termination was requested while the pod's SyncPod runs,
	// or a shorter grace period while its terminating step runs with a
	// longer one; the driver cancels that step's context.
	Cancel bool
}

// FinishEffect is what the driver must do after Machine.Finish.
type FinishEffect struct {
	// Finished: the pod went through its whole lifecycle; its worker
	// stops and takes no more steps.
	Finished bool
	// Unblocked is a static pod of the same full name that may now start;
	// the driver wakes its worker.
	Unblocked types.UID
	// Due is when Due reports the pod next (its resync or retry, or an
	// earlier SyncBy request); zero when it is not due (it is
	// terminating or finished). A driver that sleeps until the earliest
	// due time wakes earlier if this one comes first.
	Due time.Time
}

// Machine is the pod workers' state machine: the lifecycle of every pod
// (syncing → terminating → terminated), the coalescing of updates, the
// grace period, the serialization of static pods by full name, and when
// each pod is due again. It has no goroutine, no clock and no lock: the
// caller passes the time in, runs the steps Next hands out, reports each
// with Finish, and serializes every call. PodWorkers drives one.
type Machine struct {
	cfg  MachineConfig
	pods map[types.UID]*podState
	// staticByName holds, per static pod full name, the UIDs in arrival
	// order; only the first may run.
	staticByName map[string][]types.UID
}

// podState is one pod's state in a Machine.
type podState struct {
	fullname string
	static   bool
	pod      *v1.Pod
	running  *runtime.Pod
	state    State
	grace    *int64 // the shortest grace period requested

	pending     bool // an update asks for a step
	pendingType UpdateType

	working     bool  // a step handed out by Next has not finished
	workingStep State // which step

	lastSync time.Time // when the last step that ran its handler ended
	due      time.Time // a syncing pod's resync or retry, reported by Due
	syncBy   time.Time // a syncing pod's SyncBy request, reported by Due
	retryAt  time.Time // a terminating or terminated pod's retry, run by Next
	failures int       // consecutive failed steps

	finished bool // the whole lifecycle is done
	waiting  bool // a static pod waiting for its predecessor
	// restartRequested: a create arrived after termination began.
	restartRequested bool
}

// NewMachine returns an empty state machine.
func NewMachine(cfg MachineConfig) *Machine {
	cfg.defaults()
	return &Machine{cfg: cfg, pods: map[types.UID]*podState{}, staticByName: map[string][]types.UID{}}
}

// Update records an update at now. An update with no Pod and no
// RunningPod is ignored, and so is one with only a RunningPod (an orphan)
// unless it is a SyncPodKill: a pod known only to the runtime can only be
// killed.
func (m *Machine) Update(opts UpdatePodOptions, now time.Time) UpdateEffect {
	var uid types.UID
	switch {
	case opts.Pod != nil:
		uid = opts.Pod.UID
		opts.RunningPod = nil // the spec says more than the runtime's view
	case opts.RunningPod != nil && opts.UpdateType == SyncPodKill:
		uid = opts.RunningPod.ID
	default:
		return UpdateEffect{Ignored: true}
	}
	var eff UpdateEffect
	s := m.pods[uid]
	if s == nil {
		fullname := updateName(opts)
		s = &podState{fullname: fullname}
		if opts.Pod != nil && isStatic(opts.Pod) {
			s.static = true
			m.staticByName[fullname] = append(m.staticByName[fullname], uid)
			s.waiting = m.staticByName[fullname][0] != uid
		}
		m.pods[uid] = s
		eff.Created = true
	}
	if s.state >= Terminating && opts.UpdateType == SyncPodCreate {
		// The source re-created a UID that is terminating or terminated
		// (a static pod's manifest removed and put back). This lifecycle
		// finishes first; SyncKnownPods then forgets it so that the
		// caller can create the pod anew.
		s.restartRequested = true
		return UpdateEffect{Ignored: true}
	}
	if s.finished || s.state == Terminated && opts.UpdateType != SyncPodKill {
		eff.Ignored = true // a terminated pod never syncs again
		return eff
	}
	if opts.Pod != nil {
		s.pod = opts.Pod
	}
	if opts.RunningPod != nil {
		s.running = opts.RunningPod
	}
	if wantsTermination(opts) && s.state == Syncing {
		s.enterTerminating()
		eff.Cancel = s.working && s.workingStep == Syncing
	}
	if s.state >= Terminating {
		if s.waiting {
			// A static pod still waiting for its predecessor never
			// started: there is nothing to stop, and it must not hold up
			// the next pod of its name.
			m.finish(uid, s)
			return eff
		}
		if g := gracePeriod(opts); s.grace == nil || *g < *s.grace {
			// A kill running with the longer grace period is cancelled, as
			// the kubelet cancels it, and the next step kills with the
			// shorter one: a deletion with grace 0 does not wait out the
			// 30 s of the one before. (A terminating pod's grace period is
			// set as it enters the state, so a running kill has s.grace.)
			if s.grace != nil && s.working && s.workingStep == Terminating {
				eff.Cancel = true
			}
			s.grace = g
		}
	}
	if !s.pending || opts.UpdateType != SyncPodSync {
		s.pendingType = opts.UpdateType
	}
	s.pending = true
	return eff
}

func (s *podState) enterTerminating() {
	s.state = Terminating
	s.due, s.syncBy = time.Time{}, time.Time{}
	s.retryAt = time.Time{}
	s.failures = 0
}

// Next hands out the pod's next step at now, and marks the pod working
// until Finish. It returns false when the pod has nothing to do now: it is
// unknown, finished, working, a static pod waiting for its predecessor,
// or has neither a pending update nor a retry due.
func (m *Machine) Next(uid types.UID, now time.Time) (Step, bool) {
	s := m.pods[uid]
	if s == nil || s.finished || s.working || s.waiting {
		return Step{}, false
	}
	retry := s.state >= Terminating && !s.retryAt.IsZero() && !now.Before(s.retryAt)
	if !s.pending && !retry {
		return Step{}, false
	}
	step := Step{State: s.state, UID: uid, UpdateType: s.pendingType, Pod: s.pod, RunningPod: s.running, StatusNewerThan: s.lastSync}
	if s.state >= Terminating {
		step.UpdateType = SyncPodKill
		step.GracePeriod = 30
		if s.grace != nil {
			step.GracePeriod = *s.grace
		}
	}
	s.pending = false
	s.retryAt = time.Time{}
	s.working, s.workingStep = true, s.state
	return step, true
}

// RetryAt returns when the pod's failed terminating or terminated step is
// retried (zero: no retry waits). The driver wakes the pod's worker then
// and calls Next.
func (m *Machine) RetryAt(uid types.UID) time.Time {
	if s := m.pods[uid]; s != nil && !s.finished {
		return s.retryAt
	}
	return time.Time{}
}

// backOff is the delay after the pod's n-th consecutive failure.
func (m *Machine) backOff(n int) time.Duration {
	d := m.cfg.BackOffPeriod
	for i := 1; i < n && d < m.cfg.MaxBackOffPeriod; i++ {
		d *= 2
	}
	return min(d, m.cfg.MaxBackOffPeriod)
}

// Finish records the end at now of the step Next handed out for uid.
func (m *Machine) Finish(uid types.UID, res StepResult, now time.Time) FinishEffect {
	s := m.pods[uid]
	if s == nil || !s.working {
		return FinishEffect{}
	}
	s.working = false
	if !res.StatusUnread {
		s.lastSync = now
	}
	if res.Err != nil {
		s.failures++
	} else {
		s.failures = 0
	}
	switch s.workingStep {
	case Syncing:
		if s.state == Syncing {
			if res.Err != nil {
				delay := m.backOff(s.failures)
				// A refusal for a running back-off (CrashLoopBackOff) says
				// when it ends: retry then, as the kubelet does, so the
				// restart is not delayed past it.
				if until, ok := runtime.BackOffUntil(res.Err); ok {
					delay = min(max(until.Sub(now), 0), m.cfg.ResyncInterval)
				}
				s.due = now.Add(delay)
			} else {
				s.due = now.Add(m.cfg.ResyncInterval)
			}
			if res.Err == nil && res.Terminal {
				// The pod's own grace period, as for a deletion: its
				// sidecars may still run and drain.
				s.enterTerminating()
				if g := gracePeriod(UpdatePodOptions{Pod: s.pod}); s.grace == nil || *g < *s.grace {
					s.grace = g
				}
			}
		}
		if s.state != Syncing {
			// Terminate at once; the sync's failures do not count
			// against the termination.
			s.failures = 0
			s.pending = true
			return FinishEffect{}
		}
		return FinishEffect{Due: s.dueAt()}
	case Terminating:
		if res.Err != nil {
			s.retryAt = now.Add(m.backOff(s.failures))
			return FinishEffect{}
		}
		if s.pod == nil {
			// An orphan has nothing more to clean up here.
			return m.finish(uid, s)
		}
		s.state = Terminated
		s.pending = true
	case Terminated:
		if res.Err != nil {
			s.retryAt = now.Add(m.backOff(s.failures))
			return FinishEffect{}
		}
		return m.finish(uid, s)
	}
	return FinishEffect{}
}

// finish ends the pod's lifecycle and lets the next static pod of the
// same full name start.
func (m *Machine) finish(uid types.UID, s *podState) FinishEffect {
	s.finished = true
	s.waiting = false
	s.state = Terminated
	s.pending = false
	s.retryAt, s.due, s.syncBy = time.Time{}, time.Time{}, time.Time{}
	eff := FinishEffect{Finished: true}
	if !s.static {
		return eff
	}
	list := m.staticByName[s.fullname]
	for i, u := range list {
		if u == uid {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(m.staticByName, s.fullname)
		return eff
	}
	m.staticByName[s.fullname] = list
	if next := m.pods[list[0]]; next != nil && next.waiting {
		next.waiting = false
		eff.Unblocked = list[0]
	}
	return eff
}

// Due returns the syncing pods whose resync, retry after a failed step,
// or SyncBy request is due at now, and forgets those due times: the
// caller sends each a SyncPodSync update. Terminating and terminated pods
// are never returned: Next retries their steps itself, since their spec
// may be gone from the caller.
func (m *Machine) Due(now time.Time) []types.UID {
	var out []types.UID
	for uid, s := range m.pods {
		if at := s.dueAt(); !at.IsZero() && !now.Before(at) {
			out = append(out, uid)
			s.due = time.Time{}
			if !now.Before(s.syncBy) {
				s.syncBy = time.Time{}
			}
		}
	}
	return out
}

// NextDue returns the earliest time at which Due reports a pod, and false
// when no pod is due at any time. A time at or before now means Due
// reports a pod now. It looks at every pod: a caller asks it once per
// wake-up, not per pod.
func (m *Machine) NextDue() (time.Time, bool) {
	var next time.Time
	for _, s := range m.pods {
		if at := s.dueAt(); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// SyncBy asks that the syncing pod uid be reported by Due no later than
// t, even when its resync comes later: a time the caller knows the pod
// must be looked at (the kubelet's active deadline). It replaces the
// pod's earlier request, and a zero t withdraws it; the request is
// forgotten once Due reports the pod at or after t, and when the pod
// terminates. It returns the pod's due time now (zero: the pod is not
// syncing, and the request was dropped).
func (m *Machine) SyncBy(uid types.UID, t time.Time) time.Time {
	s := m.pods[uid]
	if s == nil || s.finished || s.state != Syncing {
		return time.Time{}
	}
	s.syncBy = t
	return s.dueAt()
}

// dueAt is when Due reports the pod: the earlier of its resync or retry
// and its SyncBy request; zero when neither is set or the pod is not
// syncing.
func (s *podState) dueAt() time.Time {
	if s.finished || s.state != Syncing {
		return time.Time{}
	}
	switch {
	case s.due.IsZero():
		return s.syncBy
	case s.syncBy.IsZero() || s.due.Before(s.syncBy):
		return s.due
	}
	return s.syncBy
}

// PodState returns the pod's lifecycle state and whether the machine
// knows the pod.
func (m *Machine) PodState(uid types.UID) (State, bool) {
	s := m.pods[uid]
	if s == nil {
		return Syncing, false
	}
	return s.state, true
}

// Finished reports whether the pod's lifecycle is over; a pod the machine
// does not know counts as finished.
func (m *Machine) Finished(uid types.UID) bool {
	s := m.pods[uid]
	return s == nil || s.finished
}

// Pods returns the UIDs of every pod whose lifecycle is not over.
func (m *Machine) Pods() []types.UID {
	out := make([]types.UID, 0, len(m.pods))
	for uid, s := range m.pods {
		if !s.finished {
			out = append(out, uid)
		}
	}
	return out
}

// SyncKnownPods forgets the finished pods that are not desired or were
// created again while they terminated, and returns the kills for the
// syncing pods that are not desired; the caller passes each to Update.
func (m *Machine) SyncKnownPods(desired map[types.UID]bool) []UpdatePodOptions {
	var kill []UpdatePodOptions
	for uid, s := range m.pods {
		if s.finished && (!desired[uid] || s.restartRequested) {
			delete(m.pods, uid)
			continue
		}
		if !desired[uid] && s.state == Syncing {
			kill = append(kill, UpdatePodOptions{UpdateType: SyncPodKill, Pod: s.pod, RunningPod: s.running})
		}
	}
	return kill
}

// States returns the state of every pod the machine knows.
func (m *Machine) States() map[types.UID]State {
	out := make(map[types.UID]State, len(m.pods))
	for uid, s := range m.pods {
		out[uid] = s.state
	}
	return out
}

func isStatic(pod *v1.Pod) bool {
	src := pod.Annotations["kubernetes.io/config.source"]
	return src != "" && src != "api"
}

func wantsTermination(opts UpdatePodOptions) bool {
	if opts.UpdateType == SyncPodKill {
		return true
	}
	pod := opts.Pod
	return pod != nil && (pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed)
}

// gracePeriod: the pod's own (the deletion grace period, else the spec's,
// else 30s), shortened by the kill's override.
func gracePeriod(opts UpdatePodOptions) *int64 {
	g := int64(30)
	if pod := opts.Pod; pod != nil {
		switch {
		case pod.DeletionGracePeriodSeconds != nil:
			g = *pod.DeletionGracePeriodSeconds
		case pod.Spec.TerminationGracePeriodSeconds != nil:
			g = *pod.Spec.TerminationGracePeriodSeconds
		}
	}
	if opts.Kill != nil && opts.Kill.GracePeriodOverride != nil {
		g = min(g, max(*opts.Kill.GracePeriodOverride, 0))
	}
	return &g
}
