package podworkers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
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
	// BackOffPeriod is how long after a failed sync a pod is due again.
	// Default 10s.
	BackOffPeriod time.Duration
	// Clock stamps syncs and due times. Default: the real clock.
	Clock clock.Clock
	// Logger: V(0) lifecycle changes, V(2) syncs. Default: discard.
	Logger logr.Logger
}

// PodWorkers runs one goroutine per pod UID that serializes the pod's
// syncs. Updates that arrive while a sync runs coalesce to the latest.
// Once termination is requested a pod never syncs again, and its worker
// never starts again: a SyncPodCreate for the same UID only marks it, and
// once it finished SyncKnownPods forgets it so that the pod can start
// afresh. Only one static pod per namespace/name runs at a time: a
// replacement waits until its predecessor terminated.
// All methods are safe for concurrent use; Run must be running for work
// to happen.
type PodWorkers struct {
	cfg Config
	log logr.Logger

	// mu guards everything below.
	mu      sync.Mutex
	pods    map[types.UID]*podWorker
	ctx     context.Context // set by Run
	wg      sync.WaitGroup
	started bool
	// staticByName holds, per static pod full name, the UIDs in arrival
	// order; only the first may run.
	staticByName map[string][]types.UID
}

// podWorker is one pod's state; fields are guarded by PodWorkers.mu.
type podWorker struct {
	uid      types.UID
	fullname string
	static   bool
	pod      *v1.Pod
	running  *runtime.Pod
	state    State
	pending  *UpdatePodOptions
	notify   chan struct{} // capacity 1
	grace    *int64        // the shortest grace period requested
	lastSync time.Time     // when the last sync step ended
	due      time.Time     // when a resync is due
	done     bool          // the goroutine has finished
	waiting  bool          // a static pod waiting for its predecessor
	// restartRequested: a create arrived after termination began.
	restartRequested bool
	ctxDone          context.CancelFunc
}

// New returns pod workers. It starts nothing; call Run.
func New(cfg Config) (*PodWorkers, error) {
	if cfg.Handler == nil {
		return nil, errors.New("podworkers: Config.Handler is required")
	}
	if cfg.Cache == nil {
		return nil, errors.New("podworkers: Config.Cache is required")
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = time.Minute
	}
	if cfg.BackOffPeriod <= 0 {
		cfg.BackOffPeriod = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &PodWorkers{cfg: cfg, log: cfg.Logger, pods: map[types.UID]*podWorker{}, staticByName: map[string][]types.UID{}}, nil
}

// Run lets workers run until ctx ends, then cancels every worker and
// waits for them all to return.
func (p *PodWorkers) Run(ctx context.Context) error {
	p.mu.Lock()
	p.ctx = ctx
	p.started = true
	for _, w := range p.pods {
		p.startLocked(w)
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

func isStatic(pod *v1.Pod) bool {
	src := pod.Annotations["kubernetes.io/config.source"]
	return src != "" && src != "api"
}

// UpdatePod hands a pod update to the pod's worker, creating the worker
// for a new UID. It never blocks on a sync.
func (p *PodWorkers) UpdatePod(opts UpdatePodOptions) {
	var uid types.UID
	var fullname string
	switch {
	case opts.Pod != nil:
		uid, fullname = opts.Pod.UID, opts.Pod.Namespace+"/"+opts.Pod.Name
	case opts.RunningPod != nil:
		uid, fullname = opts.RunningPod.ID, opts.RunningPod.FullName()
		opts.UpdateType = SyncPodKill
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.pods[uid]
	if w == nil {
		if opts.UpdateType == SyncPodKill && opts.Pod == nil && opts.RunningPod == nil {
			return
		}
		w = &podWorker{uid: uid, fullname: fullname, notify: make(chan struct{}, 1)}
		if opts.Pod != nil && isStatic(opts.Pod) {
			w.static = true
			p.staticByName[fullname] = append(p.staticByName[fullname], uid)
			w.waiting = p.staticByName[fullname][0] != uid
		}
		p.pods[uid] = w
		if p.started {
			p.startLocked(w)
		}
	}
	if w.state >= Terminating && opts.UpdateType == SyncPodCreate {
		// The source re-created a UID that is terminating or terminated
		// (a static pod's manifest removed and put back). This worker
		// finishes first; SyncKnownPods then forgets it so that the
		// caller can create the pod anew.
		w.restartRequested = true
		return
	}
	if w.done || w.state == Terminated && opts.UpdateType != SyncPodKill {
		return // a terminated worker never starts again
	}
	if opts.Pod != nil {
		w.pod = opts.Pod
	}
	if opts.RunningPod != nil {
		w.running = opts.RunningPod
	}
	if wantsTermination(opts) && w.state == Syncing {
		w.state = Terminating
		p.log.V(2).Info("pod termination requested", "pod", w.fullname, "podUID", uid)
	}
	if w.state >= Terminating {
		if g := gracePeriod(opts); g != nil && (w.grace == nil || *g < *w.grace) {
			w.grace = g
		}
	}
	if w.pending == nil || opts.UpdateType != SyncPodSync {
		w.pending = &opts
	}
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func wantsTermination(opts UpdatePodOptions) bool {
	if opts.UpdateType == SyncPodKill {
		return true
	}
	pod := opts.Pod
	return pod != nil && (pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed)
}

// gracePeriod: the override, else the deletion grace period, else the
// spec's, else 30s.
func gracePeriod(opts UpdatePodOptions) *int64 {
	if opts.Kill != nil && opts.Kill.GracePeriodOverride != nil {
		g := max(*opts.Kill.GracePeriodOverride, 0)
		return &g
	}
	if pod := opts.Pod; pod != nil {
		if pod.DeletionGracePeriodSeconds != nil {
			return pod.DeletionGracePeriodSeconds
		}
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			return pod.Spec.TerminationGracePeriodSeconds
		}
	}
	g := int64(30)
	return &g
}

func (p *PodWorkers) startLocked(w *podWorker) {
	ctx, cancel := context.WithCancel(p.ctx)
	w.ctxDone = cancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel()
		p.work(ctx, w)
	}()
}

// work is a pod's goroutine.
func (p *PodWorkers) work(ctx context.Context, w *podWorker) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.notify:
		}
		for {
			p.mu.Lock()
			if w.waiting {
				p.mu.Unlock()
				break // woken again when the predecessor terminates
			}
			opts := w.pending
			w.pending = nil
			state, pod, running, grace := w.state, w.pod, w.running, w.grace
			since := w.lastSync
			p.mu.Unlock()
			if opts == nil {
				break // nothing asked; a retry comes through Due and UpdatePod
			}
			finished := p.syncOnce(ctx, w, opts, state, pod, running, grace, since)
			if ctx.Err() != nil {
				return
			}
			if finished {
				p.finish(w)
				return
			}
		}
	}
}

// syncOnce runs one step of the pod's lifecycle and reports whether the
// pod is now fully terminated.
func (p *PodWorkers) syncOnce(ctx context.Context, w *podWorker, opts *UpdatePodOptions, state State, pod *v1.Pod, running *runtime.Pod, grace *int64, since time.Time) bool {
	start := p.cfg.Clock.Now()
	var status *runtime.PodStatus
	if pod != nil {
		s, err := p.cfg.Cache.GetNewerThan(ctx, w.uid, since)
		if err != nil {
			return false
		}
		status = s
	}
	// The next step waits for an observation that began after this one
	// ended, so it sees everything this one did (a container it started,
	// say). An observation that began during the step may miss that, and
	// a sync acting on it would start the container twice.
	defer func() {
		ended := p.cfg.Clock.Now()
		p.mu.Lock()
		w.lastSync = ended
		p.mu.Unlock()
	}()
	log := p.log.WithValues("pod", w.fullname, "podUID", w.uid)

	switch state {
	case Syncing:
		terminal, err := p.cfg.Handler.SyncPod(ctx, opts.UpdateType, pod, status)
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			log.V(2).Info("sync failed", "err", err)
			w.due = start.Add(p.cfg.BackOffPeriod)
			return false
		}
		w.due = start.Add(p.cfg.ResyncInterval)
		if terminal && w.state == Syncing {
			w.state = Terminating
			// As in the kubelet, a pod that finished is terminated with
			// its own grace period, which what still runs (sidecars) uses.
			if g := gracePeriod(UpdatePodOptions{Pod: pod}); w.grace == nil || *g < *w.grace {
				w.grace = g
			}
			log.V(0).Info("pod reached a terminal phase")
		}
		if w.state != Syncing {
			p.requeueLocked(w)
		}
		return false

	case Terminating:
		var err error
		if pod == nil {
			err = p.cfg.Handler.SyncTerminatingRuntimePod(ctx, running)
		} else {
			g := int64(30)
			if grace != nil {
				g = *grace
			}
			err = p.cfg.Handler.SyncTerminatingPod(ctx, pod, status, g)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			log.V(2).Info("terminating failed", "err", err)
			w.due = start.Add(p.cfg.BackOffPeriod)
			return false
		}
		if pod == nil {
			w.state = Terminated
			return true // an orphan has nothing more to clean up here
		}
		w.state = Terminated
		log.V(0).Info("pod terminated")
		p.requeueLocked(w)
		return false

	default: // Terminated
		if pod == nil {
			return true
		}
		if err := p.cfg.Handler.SyncTerminatedPod(ctx, pod, status); err != nil {
			p.mu.Lock()
			w.due = start.Add(p.cfg.BackOffPeriod)
			p.mu.Unlock()
			return false
		}
		return true
	}
}

func (p *PodWorkers) requeueLocked(w *podWorker) {
	if w.pending == nil {
		w.pending = &UpdatePodOptions{UpdateType: SyncPodKill}
	}
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// finish marks the worker done and lets a waiting static pod of the same
// name start.
func (p *PodWorkers) finish(w *podWorker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.done = true
	w.state = Terminated
	if !w.static {
		return
	}
	list := p.staticByName[w.fullname]
	for i, uid := range list {
		if uid == w.uid {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(p.staticByName, w.fullname)
		return
	}
	p.staticByName[w.fullname] = list
	if next := p.pods[list[0]]; next != nil && next.waiting {
		next.waiting = false
		select {
		case next.notify <- struct{}{}:
		default:
		}
	}
}

// Due returns the pods whose resync (or retry after an error) is due at
// now, for the sync loop to resync.
func (p *PodWorkers) Due(now time.Time) []types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []types.UID
	for uid, w := range p.pods {
		if !w.done && !w.due.IsZero() && !now.Before(w.due) {
			out = append(out, uid)
			w.due = time.Time{}
		}
	}
	return out
}

// PodState returns the pod's lifecycle state and whether its worker
// exists.
func (p *PodWorkers) PodState(uid types.UID) (State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.pods[uid]
	if w == nil {
		return Syncing, false
	}
	return w.state, true
}

// IsPodTerminationRequested reports whether the pod is terminating or
// terminated.
func (p *PodWorkers) IsPodTerminationRequested(uid types.UID) bool {
	s, ok := p.PodState(uid)
	return ok && s >= Terminating
}

// ShouldPodContentBeRemoved reports whether the pod's worker finished, so
// its containers, sandboxes and volumes may be removed. A pod the workers
// never saw counts as removable.
func (p *PodWorkers) ShouldPodContentBeRemoved(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.pods[uid]
	return w == nil || w.done
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
	var kill []UpdatePodOptions
	for uid, w := range p.pods {
		if w.done && (!want[uid] || w.restartRequested) {
			delete(p.pods, uid)
			continue
		}
		if want[uid] {
			continue
		}
		if w.state == Syncing {
			kill = append(kill, UpdatePodOptions{UpdateType: SyncPodKill, Pod: w.pod, RunningPod: w.running})
		}
	}
	p.mu.Unlock()
	for _, k := range kill {
		p.UpdatePod(k)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[types.UID]State, len(p.pods))
	for uid, w := range p.pods {
		out[uid] = w.state
	}
	return out
}
