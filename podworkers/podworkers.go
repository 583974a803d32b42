package podworkers

import (
	"context"
	"errors"
	"fmt"
	rdebug "runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// UpdateType says why a pod worker is asked to act.
type UpdateType int

// Update types, the kubelet's.
const (
	// SyncPodCreate: the pod was added.
	SyncPodCreate UpdateType = iota
	// SyncPodUpdate: the pod's spec changed.
	SyncPodUpdate
	// SyncPodSync: a periodic or event-driven resync.
	SyncPodSync
	// SyncPodKill: the pod must stop (deleted, evicted, orphaned).
	SyncPodKill
)

func (u UpdateType) String() string {
	switch u {
	case SyncPodCreate:
		return "create"
	case SyncPodUpdate:
		return "update"
	case SyncPodSync:
		return "sync"
	case SyncPodKill:
		return "kill"
	}
	return "unknown"
}

// SyncHandler does the work for one pod. The pod workers call it from the
// pod's own goroutine, never concurrently for the same pod.
type SyncHandler interface {
	// SyncPod moves a running pod towards its spec. It returns
	// isTerminal when the pod reached Succeeded or Failed: the worker
	// then terminates it.
	SyncPod(ctx context.Context, updateType UpdateType, pod *v1.Pod, status *runtime.PodStatus) (isTerminal bool, err error)
	// SyncTerminatingPod stops all the pod's containers within the grace
	// period. It is called until it returns nil.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, gracePeriod int64) error
	// SyncTerminatingRuntimePod stops a pod known only to the runtime (an
	// orphan, with no spec).
	SyncTerminatingRuntimePod(ctx context.Context, running *runtime.Pod) error
	// SyncTerminatedPod cleans up after a pod whose containers have all
	// stopped (volumes, status). It is called until it returns nil.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus) error
}

// StatusCache is where workers read the runtime's view of their pod;
// pleg.Cache implements it.
type StatusCache interface {
	GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*runtime.PodStatus, error)
}

// KillPodOptions tunes a SyncPodKill update.
type KillPodOptions struct {
	// GracePeriodOverride shortens the grace period (never lengthens it).
	GracePeriodOverride *int64
}

// UpdatePodOptions is one request to a pod worker.
type UpdatePodOptions struct {
	UpdateType UpdateType
	// Pod is the spec; nil for an orphan, which then needs RunningPod.
	Pod        *v1.Pod
	RunningPod *runtime.Pod
	Kill       *KillPodOptions
}

// State is where a pod is in its lifecycle.
type State int

// The lifecycle: a pod is synced, then terminating, then terminated, and
// never goes back.
const (
	Syncing State = iota
	Terminating
	Terminated
)

func (s State) String() string {
	return [...]string{"syncing", "terminating", "terminated"}[s]
}

// Config configures the pod workers.
type Config struct {
	// Handler does the work. Required.
	Handler SyncHandler
	// Cache gives workers the runtime's view. Required.
	Cache StatusCache
	// ResyncInterval is how long after a successful sync a pod is due
	// again. Default 1m, the kubelet's syncFrequency.
	ResyncInterval time.Duration
	// BackOffPeriod is how long after a failed step a pod is due again;
	// it doubles with each further consecutive failure, up to
	// MaxBackOffPeriod. Default 10s, the kubelet's.
	BackOffPeriod time.Duration
	// MaxBackOffPeriod caps the back-off. Default: BackOffPeriod (no
	// growth, as in the kubelet).
	MaxBackOffPeriod time.Duration
	// Clock stamps steps and times retries. Default: the real clock.
	Clock clock.Clock
	// Logger: V(0) lifecycle changes and recovered panics, V(2) failed
	// steps. Default: discard.
	Logger logr.Logger
	// Registerer receives nodekit_podworkers_sync_panics_total. Nil: not
	// registered.
	Registerer prometheus.Registerer
}

// PodWorkers drives a Machine: it runs a pod's goroutine, one at most per
// pod UID, while the pod has a step to take or a retry to wait for; the
// goroutine takes the steps one at a time and returns when there is
// neither, and the next update starts another. It owns the clock, retries
// failed terminating and terminated steps after their back-off, cancels a
// SyncPod when termination is requested, and recovers a panicking
// handler. Updates that arrive while a step runs coalesce to the latest.
// All methods are safe for concurrent use; Run must be running for work
// to happen.
type PodWorkers struct {
	cfg     Config
	log     logr.Logger
	metrics *metrics

	// mu guards everything below, the machine included.
	mu      sync.Mutex
	m       *Machine
	workers map[types.UID]*worker
	ctx     context.Context // set by Run
	wg      sync.WaitGroup
	started bool
	// synced: SyncKnownPods has run, so a pod without a worker is known
	// to run nothing.
	synced bool
	// told is the due time NextDue last returned; zero when it returned
	// none (or was never asked), so that any due time is news.
	told time.Time

	// dueChanged (capacity 1) holds a value when a due time earlier than
	// told may have appeared; sends never block, so wake-ups coalesce.
	dueChanged chan struct{}
}

// worker is one pod's goroutine bookkeeping; fields are guarded by
// PodWorkers.mu.
type worker struct {
	notify  chan struct{}      // capacity 1: a wake-up is pending
	cancel  context.CancelFunc // cancels the running step; nil between steps
	running bool               // the pod's goroutine exists
}

// wakeLocked makes the pod's goroutine look for a step: it signals the
// goroutine when it runs, and starts one when none does and Run is
// running. p.mu must be held.
func (p *PodWorkers) wakeLocked(uid types.UID, w *worker) {
	if w.running {
		select {
		case w.notify <- struct{}{}:
		default:
		}
		return
	}
	if p.started {
		p.startLocked(uid, w)
	}
}

// New returns pod workers. It starts nothing; call Run.
func New(cfg Config) (*PodWorkers, error) {
	if cfg.Handler == nil {
		return nil, errors.New("podworkers: Config.Handler is required")
	}
	if cfg.Cache == nil {
		return nil, errors.New("podworkers: Config.Cache is required")
	}
	mc := MachineConfig{ResyncInterval: cfg.ResyncInterval, BackOffPeriod: cfg.BackOffPeriod, MaxBackOffPeriod: cfg.MaxBackOffPeriod}
	mc.defaults()
	cfg.ResyncInterval, cfg.BackOffPeriod, cfg.MaxBackOffPeriod = mc.ResyncInterval, mc.BackOffPeriod, mc.MaxBackOffPeriod
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &PodWorkers{
		cfg: cfg, log: cfg.Logger, metrics: m, m: NewMachine(mc), workers: map[types.UID]*worker{},
		dueChanged: make(chan struct{}, 1),
	}, nil
}

// Run lets workers run until ctx ends, then cancels every worker and
// waits for them all to return.
func (p *PodWorkers) Run(ctx context.Context) error {
	p.mu.Lock()
	p.ctx = ctx
	p.started = true
	for _, uid := range p.m.Pods() {
		if w := p.workers[uid]; w != nil && !w.running {
			p.startLocked(uid, w)
		}
	}
	p.mu.Unlock()
	<-ctx.Done()
	// No worker starts after this, so the wait below cannot race an Add.
	p.mu.Lock()
	p.started = false
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// UpdatePod hands a pod update to the pod's worker, creating the worker
// for a new UID. It never blocks on a step. An update with only a
// RunningPod (an orphan) is ignored unless it is a SyncPodKill.
func (p *PodWorkers) UpdatePod(opts UpdatePodOptions) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updateLocked(opts)
}

func (p *PodWorkers) updateLocked(opts UpdatePodOptions) {
	eff := p.m.Update(opts, p.cfg.Clock.Now())
	uid := updateUID(opts)
	if eff.Created {
		p.workers[uid] = &worker{notify: make(chan struct{}, 1)}
	}
	w := p.workers[uid]
	if w == nil || eff.Ignored && !eff.Created {
		return
	}
	if eff.Cancel && w.cancel != nil {
		p.log.V(2).Info("termination requested: cancelling the running sync", "pod", updateName(opts), "podUID", uid)
		w.cancel()
	}
	p.wakeLocked(uid, w)
}

func updateUID(opts UpdatePodOptions) types.UID {
	if opts.Pod != nil {
		return opts.Pod.UID
	}
	if opts.RunningPod != nil {
		return opts.RunningPod.ID
	}
	return ""
}

func updateName(opts UpdatePodOptions) string {
	if opts.Pod != nil {
		return opts.Pod.Namespace + "/" + opts.Pod.Name
	}
	if opts.RunningPod != nil {
		return opts.RunningPod.FullName()
	}
	return ""
}

// startLocked starts the pod's goroutine. p.mu must be held, Run must be
// running, and the pod must have no goroutine.
func (p *PodWorkers) startLocked(uid types.UID, w *worker) {
	w.running = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.work(p.ctx, uid, w)
	}()
}

// work is a pod's goroutine: it takes the steps the machine hands out,
// one at a time, and waits out the back-off of a failed terminating or
// terminated step. It returns when the pod has neither a step nor a
// retry (a pod that syncs waits for its next update without a
// goroutine), when its lifecycle is over, or when ctx ends.
func (p *PodWorkers) work(ctx context.Context, uid types.UID, w *worker) {
	// Steps' contexts hang off one per goroutine, so that making and
	// cancelling them never contends with other workers on Run's context.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	for {
		p.mu.Lock()
		// Once Run's context ended no step is taken: the machine keeps the
		// pod's pending update for the next Run.
		var step Step
		ok, stopping := false, ctx.Err() != nil
		if !stopping {
			step, ok = p.m.Next(uid, p.cfg.Clock.Now())
		}
		var retryAt time.Time
		if !ok {
			retryAt = p.m.RetryAt(uid)
		}
		if stopping || !ok && (p.m.Finished(uid) || retryAt.IsZero()) {
			// Nothing to do or wait for. Updates are recorded, and their
			// wake-ups sent, under p.mu, as Next and this return are: one
			// recorded before is a step Next handed out, one recorded
			// after finds no goroutine and starts one. A wake-up still
			// pending was answered by Next.
			select {
			case <-w.notify:
			default:
			}
			w.running = false
			p.mu.Unlock()
			return
		}
		if !ok {
			p.mu.Unlock()
			p.wait(ctx, w, retryAt)
			continue
		}
		stepCtx, cancel := context.WithCancel(ctx)
		w.cancel = cancel
		p.mu.Unlock()

		res := p.runStep(stepCtx, step)

		p.mu.Lock()
		w.cancel = nil
		cancel()
		eff := p.m.Finish(uid, res, p.cfg.Clock.Now())
		p.noteDueLocked(eff.Due)
		if eff.Unblocked != "" {
			if next := p.workers[eff.Unblocked]; next != nil {
				p.wakeLocked(eff.Unblocked, next)
			}
		}
		p.mu.Unlock()
	}
}

// wait blocks until the worker is woken, its retry is due, or ctx ends.
func (p *PodWorkers) wait(ctx context.Context, w *worker, retryAt time.Time) {
	d := retryAt.Sub(p.cfg.Clock.Now())
	if d <= 0 {
		return
	}
	t := p.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-w.notify:
	case <-t.C():
	}
}

// runStep reads the pod's status and runs the handler for one step. A
// panic in the handler or the cache is recovered, logged, counted, and
// reported as the step's error.
func (p *PodWorkers) runStep(ctx context.Context, step Step) (res StepResult) {
	// The logger is made only when something is logged: a step that
	// logs nothing allocates nothing for it.
	log := func() logr.Logger {
		return p.log.WithValues("pod", updateName(UpdatePodOptions{Pod: step.Pod, RunningPod: step.RunningPod}), "podUID", step.UID)
	}
	defer func() {
		if r := recover(); r != nil {
			p.metrics.panics.Inc()
			log().Error(fmt.Errorf("%v", r), "sync handler panicked", "step", step.State.String(), "stack", string(rdebug.Stack()))
			res = StepResult{Err: fmt.Errorf("podworkers: %s step: panic: %v", step.State, r)}
		}
	}()
	var status *runtime.PodStatus
	if step.Pod != nil {
		s, err := p.cfg.Cache.GetNewerThan(ctx, step.UID, step.StatusNewerThan)
		if err != nil {
			log().V(2).Info("reading the pod status failed", "step", step.State.String(), "err", err)
			return StepResult{Err: fmt.Errorf("podworkers: read status: %w", err), StatusUnread: true}
		}
		status = s
	}
	switch step.State {
	case Syncing:
		terminal, err := p.cfg.Handler.SyncPod(ctx, step.UpdateType, step.Pod, status)
		if err != nil {
			log().V(2).Info("sync failed", "err", err)
			return StepResult{Err: err}
		}
		if terminal {
			log().V(0).Info("pod reached a terminal phase")
		}
		return StepResult{Terminal: terminal}
	case Terminating:
		var err error
		if step.Pod == nil {
			err = p.cfg.Handler.SyncTerminatingRuntimePod(ctx, step.RunningPod)
		} else {
			err = p.cfg.Handler.SyncTerminatingPod(ctx, step.Pod, status, step.GracePeriod)
		}
		if err != nil {
			log().V(2).Info("terminating failed", "err", err)
			return StepResult{Err: err}
		}
		log().V(0).Info("pod terminated")
		return StepResult{}
	default: // Terminated
		if err := p.cfg.Handler.SyncTerminatedPod(ctx, step.Pod, status); err != nil {
			log().V(2).Info("cleaning up a terminated pod failed", "err", err)
			return StepResult{Err: err}
		}
		return StepResult{}
	}
}

// Due returns the syncing pods whose resync (or retry after a failed
// step, or SyncBy request) is due at now, for the sync loop to resync
// with SyncPodSync, and forgets those due times. Failed terminating and
// terminated steps are retried by the workers themselves and are never
// returned. Safe for concurrent use; never blocks on a step.
func (p *PodWorkers) Due(now time.Time) []types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.Due(now)
}

// NextDue returns the earliest time at which Due reports a pod, and false
// when no pod is due at any time; a time at or before now means Due
// reports a pod now. From then on, until the next call, DueChanged
// receives whenever a pod becomes due before the time returned (or at
// all, after false). It looks at every pod: ask it once per wake-up. Safe
// for concurrent use; never blocks on a step.
func (p *PodWorkers) NextDue() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next, ok := p.m.NextDue()
	p.told = next
	return next, ok
}

// DueChanged returns a channel that receives when a pod became due
// earlier than NextDue last said: a sync finished and set the pod's
// resync or retry, or SyncBy asked for an earlier sync. The caller then
// asks NextDue again. The channel has capacity 1 and is never closed;
// sends never block, so any number of changes before the receive make one
// value, and a value may be stale (NextDue then returns what the caller
// already knew).
func (p *PodWorkers) DueChanged() <-chan struct{} { return p.dueChanged }

// SyncBy asks that the syncing pod be reported by Due no later than t,
// even when its periodic resync comes later: a time the handler knows the
// pod must be looked at again, such as the end of its active deadline. It
// replaces the pod's earlier request; a zero t withdraws it. The request
// is forgotten once Due reports the pod at or after t, and when the pod's
// termination is requested; a pod that is not syncing ignores it. Safe
// for concurrent use, and from the SyncHandler; never blocks on a step.
func (p *PodWorkers) SyncBy(uid types.UID, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noteDueLocked(p.m.SyncBy(uid, t))
}

// noteDueLocked signals DueChanged when a pod's due time at comes before
// the one NextDue last returned, or when that returned none.
func (p *PodWorkers) noteDueLocked(at time.Time) {
	if at.IsZero() || !p.told.IsZero() && !at.Before(p.told) {
		return
	}
	p.told = at
	select {
	case p.dueChanged <- struct{}{}:
	default:
	}
}

// PodState returns the pod's lifecycle state and whether its worker
// exists.
func (p *PodWorkers) PodState(uid types.UID) (State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.PodState(uid)
}

// IsPodTerminationRequested reports whether the pod is terminating or
// terminated.
func (p *PodWorkers) IsPodTerminationRequested(uid types.UID) bool {
	s, ok := p.PodState(uid)
	return ok && s >= Terminating
}

// CouldHaveRunningContainers reports whether the pod's containers may
// still run, as the kubelet's pod workers do: its worker has not yet
// stopped it for good (it is not Terminated), or, for a pod without a
// worker, SyncKnownPods has not yet run, so the workers do not know every
// pod there is. status.Config.CouldHaveRunningContainers is its use.
func (p *PodWorkers) CouldHaveRunningContainers(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, known := p.m.PodState(uid); known {
		return s < Terminated
	}
	return !p.synced
}

// ShouldPodContentBeRemoved reports whether the pod's worker finished, so
// its containers, sandboxes and volumes may be removed. A pod the workers
// never saw counts as removable.
func (p *PodWorkers) ShouldPodContentBeRemoved(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.Finished(uid)
}

// SyncKnownPods reconciles the workers with the desired pods: workers for
// UIDs not desired are asked to terminate (as orphans of the config), and
// finished workers are forgotten when their UID is no longer desired or
// was created again while it terminated. It returns the state of every
// remaining worker; a desired pod missing from it has no worker, and the
// caller starts it with a SyncPodCreate update.
func (p *PodWorkers) SyncKnownPods(desired []*v1.Pod) map[types.UID]State {
	want := make(map[types.UID]bool, len(desired))
	for _, pod := range desired {
		want[pod.UID] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.synced = true
	for _, k := range p.m.SyncKnownPods(want) {
		p.updateLocked(k)
	}
	states := p.m.States()
	for uid := range p.workers {
		if _, ok := states[uid]; !ok {
			delete(p.workers, uid)
		}
	}
	return states
}
