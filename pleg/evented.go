package pleg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// EventStreamer is the CRI event stream; every
// k8s.io/cri-api/pkg/apis.RuntimeService has it (runtime/cri.Client,
// fakecri.Runtime), though not every runtime serves it (containerd 1.6
// does not). GetContainerEvents blocks, sending events to ch, until it
// fails or ctx ends. It calls established once the subscription is in
// place (criclient: once the request is sent; fakecri: once subscribed);
// a streamer that never calls it counts as established at its first
// event.
type EventStreamer interface {
	GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// Defaults of EventedConfig.
const (
	DefaultSafetyRelistPeriod = 5 * time.Minute
	DefaultRetryPeriod        = 10 * time.Second
	DefaultInspectBackOff     = time.Second
	DefaultInspectBackOffMax  = 30 * time.Second
)

// EventedConfig configures an evented generator.
type EventedConfig struct {
	// Config is the relisting generator's configuration, used for the
	// initial relist, the safety relists and the fallback.
	Config
	// Streamer is the CRI event stream. Required.
	Streamer EventStreamer
	// SafetyRelistPeriod is how often the runtime is relisted anyway,
	// to catch what the stream missed. Default 5m, the kubelet's.
	SafetyRelistPeriod time.Duration
	// RetryPeriod is how soon a broken or refused stream is tried again;
	// meanwhile the generator relists every RelistPeriod. Default 10s.
	RetryPeriod time.Duration
	// InspectBackOff is how soon a pod whose inspection failed is
	// inspected again; the delay doubles at each failure up to
	// InspectBackOffMax. Defaults 1s and 30s.
	InspectBackOff    time.Duration
	InspectBackOffMax time.Duration
}

// Evented generates events from the CRI container event stream: an
// event queues its pod for inspection (GetPodStatus); the inspection
// updates the cache and emits an event per container or sandbox whose
// state differs from what was last seen of the pod, so a change is seen
// within milliseconds, and an idle node costs no wake-up but a safety
// relist. It relists at start, once the runtime has accepted the stream
// and again RelistPeriod later (a runtime may be slow to put the
// subscription in place), and every SafetyRelistPeriod; relists and inspections keep one record
// per pod. When the stream is refused (Unimplemented) or breaks it falls
// back to relisting every RelistPeriod and tries the stream again every
// RetryPeriod.
//
// The stream is read on its own goroutine into a queue of pod UIDs: a
// pod is queued once however many events name it, and the events
// themselves (each carrying every container's status of its pod) are
// dropped as soon as read. Memory is bounded by the number of pods, and
// a slow inspection never holds up the stream. Each event marks its pod
// pending in the cache until an inspection that began after it is
// recorded, so the cache's global timestamp, moved while readers wait,
// never vouches for a pod past an event not yet inspected. A pod whose
// inspection fails keeps its last good status beside the error in the
// cache and is inspected again with back-off until an inspection
// succeeds or the pod is gone. A pod whose inspection is slow (10 ms or
// more) waits four times as long before the next one.
type Evented struct {
	cfg     EventedConfig
	generic *Generic
	queue   *podQueue

	// retries, cooling and deferred belong to Run's goroutine.
	retries map[types.UID]*retry
	// cooling: pods whose last inspection took long, not to be inspected
	// again before the time given.
	cooling map[types.UID]time.Time
	// deferred: pods taken from the queue while cooling, queued again
	// once their cooling ends.
	deferred map[types.UID]podRef

	// mu guards streaming and busySince.
	mu        sync.Mutex
	streaming bool
	// busySince: when the inspection or relist under way while streaming
	// began; zero when the loop waits.
	busySince time.Time

	// tickMu guards tick.
	tickMu sync.Mutex
	// tick, when set, is the armed timer at which the reader moves the
	// cache's global timestamp; armed says it was set.
	tick  clock.Timer
	armed chan struct{}
}

// coolFactor, coolMin and coolMax: a pod whose successful inspection
// took d >= coolMin is not inspected again for coolFactor*d, at most
// coolMax, so that a pod with thousands of containers, whose every change
// sends an event, costs the generator at most about 1/(coolFactor+1) of a
// core and leaves the runtime to the pod workers. Pods that inspect faster
// than coolMin are never held back; a failed inspection is not counted (it
// has its own back-off), and a runtime that stalled once holds a pod back
// for coolMax at the most.
const (
	coolFactor = 4
	coolMin    = 10 * time.Millisecond
	coolMax    = 5 * time.Second
)

// retry is a pod whose last inspection failed.
type retry struct {
	ref   podRef
	delay time.Duration
	due   time.Time
	// queued: the retry is due and the pod queued for it.
	queued bool
}

var _ Generator = (*Evented)(nil)

// NewEvented returns an evented generator.
func NewEvented(cfg EventedConfig) (*Evented, error) {
	if cfg.Streamer == nil {
		return nil, errors.New("pleg: EventedConfig.Streamer is required")
	}
	if cfg.SafetyRelistPeriod <= 0 {
		cfg.SafetyRelistPeriod = DefaultSafetyRelistPeriod
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = DefaultRetryPeriod
	}
	if cfg.InspectBackOff <= 0 {
		cfg.InspectBackOff = DefaultInspectBackOff
	}
	if cfg.InspectBackOffMax <= 0 {
		cfg.InspectBackOffMax = DefaultInspectBackOffMax
	}
	cfg.InspectBackOffMax = max(cfg.InspectBackOffMax, cfg.InspectBackOff)
	g, err := NewGeneric(cfg.Config)
	if err != nil {
		return nil, err
	}
	cfg.Config = g.cfg
	return &Evented{cfg: cfg, generic: g, queue: newPodQueue(cfg.Cache), retries: map[types.UID]*retry{}, armed: make(chan struct{}, 1),
		cooling: map[types.UID]time.Time{}, deferred: map[types.UID]podRef{}}, nil
}

// Watch implements Generator.
func (e *Evented) Watch() <-chan *Event { return e.generic.Watch() }

// Healthy implements Generator: healthy while the generator's loop
// turns, by the relisting generator's threshold. While streaming it
// fails once an inspection or relist has been under way for longer than
// RelistThreshold; otherwise the fallback relists count, as for Generic.
// An inspection stuck in the runtime makes it unhealthy either way.
func (e *Evented) Healthy() error {
	e.mu.Lock()
	streaming, busy := e.streaming, e.busySince
	e.mu.Unlock()
	if !streaming {
		return e.generic.Healthy()
	}
	if busy.IsZero() {
		return nil
	}
	if since := e.cfg.Clock.Since(busy); since > e.cfg.RelistThreshold {
		return fmt.Errorf("pleg: an inspection has been under way for %v; threshold is %v", since.Round(time.Second), e.cfg.RelistThreshold)
	}
	return nil
}

// busy records that the loop starts (true) or ends (false) a piece of
// work, for Healthy.
func (e *Evented) busy(b bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b {
		e.busySince = e.cfg.Clock.Now()
	} else {
		e.busySince = time.Time{}
	}
}

// Streaming reports whether the event stream is up: the runtime
// accepted the subscription and did not refuse it for a moment (or
// delivered an event), and the relist that follows is done.
func (e *Evented) Streaming() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.streaming
}

func (e *Evented) setStreaming(v bool) {
	e.mu.Lock()
	e.streaming = v
	e.mu.Unlock()
}

// Run implements Generator.
func (e *Evented) Run(ctx context.Context) error {
	e.relist(ctx)
	for {
		err := e.stream(ctx)
		e.setStreaming(false)
		e.busy(false)
		e.generic.touch() // Healthy counts from the fallback relists now
		e.handOver()
		if ctx.Err() != nil {
			return nil
		}
		e.cfg.Logger.Info("the container event stream is unavailable; relisting", "err", err, "retryIn", e.cfg.RetryPeriod)
		if !e.relistFor(ctx, e.cfg.RetryPeriod) {
			return nil
		}
	}
}

// relist relists the runtime once, and retries the pods whose
// inspection failed with the evented back-off, as a failure of a
// stream-driven inspection is.
func (e *Evented) relist(ctx context.Context) {
	for uid, in := range e.generic.relist(ctx) {
		if in.failed {
			if ctx.Err() == nil {
				e.backOff(uid, in.ref)
			}
		} else {
			delete(e.retries, uid)
		}
	}
}

// backOff schedules the next inspection of a pod whose inspection
// failed: InspectBackOff after the first failure, doubling up to
// InspectBackOffMax.
func (e *Evented) backOff(uid types.UID, ref podRef) {
	r := e.retries[uid]
	if r == nil {
		r = &retry{ref: ref, delay: e.cfg.InspectBackOff}
		e.retries[uid] = r
	} else {
		r.delay = min(2*r.delay, e.cfg.InspectBackOffMax)
	}
	r.due = e.cfg.Clock.Now().Add(r.delay)
	r.queued = false
}

// handOver gives the pods still queued or awaiting a retry to the
// relists, which inspect them at the next pass, now that the stream is
// down. Their pending marks go: the next relist's timestamp covers them.
func (e *Evented) handOver() {
	uids := e.queue.drain()
	for uid := range e.retries {
		uids = append(uids, uid)
		delete(e.retries, uid)
	}
	for uid := range e.deferred {
		uids = append(uids, uid)
		delete(e.deferred, uid)
	}
	clear(e.cooling)
	e.generic.reinspectAtNextRelist(uids)
}

// relistFor relists every RelistPeriod for d; false when ctx ended.
func (e *Evented) relistFor(ctx context.Context, d time.Duration) bool {
	deadline := e.cfg.Clock.NewTimer(d)
	defer deadline.Stop()
	tick := e.cfg.Clock.NewTicker(e.cfg.RelistPeriod)
	defer tick.Stop()
	for {
		e.relist(ctx)
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C():
			return true
		case <-tick.C():
		}
	}
}

// read moves the stream's events into the pod queue until the streamer
// has returned (streamed closed), marking each pod pending in the cache
// as its event arrives. It never blocks on the inspector, and once ctx
// ends it drains and drops what the streamer still sends, so a streamer
// that sends without watching its context cannot block shutdown.
//
// It also moves the cache's global timestamp, while streaming, to now,
// which is safe for every pod because every event received so far has
// marked its pod: a second after a reader of the cache started waiting
// (wantTick), and every second while one still waits; never while none
// does, so that an idle node costs no wake-up. The second leaves the
// events of what a pod worker just did the time to arrive. Events and
// ticks are taken in turn on this one goroutine, so no event received
// before a tick is left unmarked by it.
func (e *Evented) read(ctx context.Context, ch <-chan *runtimeapi.ContainerEventResponse, streamed <-chan struct{}) {
	var tickC <-chan time.Time
	defer e.disarm()
	if e.cfg.Cache.waiting() {
		e.wantTick()
	}
	for {
		// Read before the event, so that its arrival is never stamped
		// later than it was received.
		now := e.cfg.Clock.Now()
		select {
		case <-streamed:
			return
		case ev := <-ch:
			if ctx.Err() != nil {
				continue
			}
			m := ev.GetPodSandboxStatus().GetMetadata()
			if m.GetUid() == "" {
				continue
			}
			// Copies, so that nothing of the event stays reachable.
			e.queue.add(types.UID(strings.Clone(m.GetUid())), podRef{strings.Clone(m.GetName()), strings.Clone(m.GetNamespace())}, now, true)
		case <-e.armed:
			tickC = e.armedTick()
		case <-tickC:
			tickC = nil
			e.disarm()
			if e.Streaming() {
				e.cfg.Cache.UpdateTime(e.cfg.Clock.Now())
			}
			if e.cfg.Cache.waiting() {
				e.wantTick()
			}
		}
	}
}

// wantTick arms the tick a second from now, unless it is armed. The
// cache calls it as a reader starts waiting, before it blocks.
func (e *Evented) wantTick() {
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	if e.tick != nil {
		return
	}
	e.tick = e.cfg.Clock.NewTimer(time.Second)
	select {
	case e.armed <- struct{}{}:
	default:
	}
}

// armedTick returns the armed tick's channel, or nil.
func (e *Evented) armedTick() <-chan time.Time {
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	if e.tick == nil {
		return nil
	}
	return e.tick.C()
}

// disarm stops the tick.
func (e *Evented) disarm() {
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	if e.tick != nil {
		e.tick.Stop()
		e.tick = nil
	}
}

// settleTime: a stream the runtime accepted counts as up once it was not
// refused for this long, or once it delivered an event. Over gRPC the
// subscription is sent before the runtime answers, and a runtime without
// the stream refuses it within a round trip.
const settleTime = 100 * time.Millisecond

// stream consumes the event stream until it fails or ctx ends.
func (e *Evented) stream(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Unbuffered: an event counts as received once the reader has it.
	ch := make(chan *runtimeapi.ContainerEventResponse)
	errc := make(chan error, 1)
	streamed := make(chan struct{})
	established := make(chan struct{})
	var once sync.Once
	onEstablished := func(runtimeapi.RuntimeService_GetContainerEventsClient) { once.Do(func() { close(established) }) }
	e.cfg.Cache.hookWaits(e.wantTick)
	defer e.cfg.Cache.hookWaits(nil)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(streamed)
		errc <- e.generic.guard("the container event stream", func() error {
			return e.cfg.Streamer.GetContainerEvents(sctx, ch, onEstablished)
		})
	}()
	go func() {
		defer wg.Done()
		e.read(sctx, ch, streamed)
	}()
	defer wg.Wait()
	defer cancel()

	if err := e.establish(ctx, errc, established); err != nil {
		return err
	}
	// Relist once now the subscription stands, to catch what happened
	// before it; what happens from now on comes as events.
	e.relist(ctx)
	if err := e.catchUp(ctx, errc); err != nil {
		return err
	}
	e.setStreaming(true)

	safety := e.cfg.Clock.NewTicker(e.cfg.SafetyRelistPeriod)
	defer safety.Stop()
	// due fires when the next retry or end of cooling is due; nil while
	// none is pending.
	var due clock.Timer
	var dueC <-chan time.Time
	var dueAt time.Time
	defer func() {
		if due != nil {
			due.Stop()
		}
	}()
	for {
		next := e.nextDue()
		if !next.IsZero() && !next.After(e.cfg.Clock.Now()) {
			// Came due while the loop was busy.
			e.queueDueRetries()
			next = e.nextDue()
		}
		if !next.Equal(dueAt) {
			if due != nil {
				due.Stop()
				due, dueC = nil, nil
			}
			dueAt = next
			if !next.IsZero() {
				due = e.cfg.Clock.NewTimer(max(next.Sub(e.cfg.Clock.Now()), 0))
				dueC = due.C()
				if !next.After(e.cfg.Clock.Now()) {
					// The clock passed next while the timer was being
					// set, which then fires that much late: handle it
					// now.
					due.Stop()
					due, dueC, dueAt = nil, nil, time.Time{}
					continue
				}
			}
		}
		select {
		case err := <-errc:
			return fmt.Errorf("pleg: container events: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-e.queue.ready:
			// One pod per turn, so that errors are not held up by a long
			// queue.
			if uid, ref, ok := e.queue.take(); ok {
				if until, cool := e.cooling[uid]; cool && until.After(e.cfg.Clock.Now()) {
					e.deferred[uid] = ref // its events stay pending
				} else {
					e.busy(true)
					e.inspect(ctx, uid, ref)
					e.busy(false)
				}
			}
			if e.queue.len() > 0 {
				e.queue.signal()
			}
		case <-dueC:
			due, dueC, dueAt = nil, nil, time.Time{}
			e.queueDueRetries()
		case <-safety.C():
			e.busy(true)
			e.relist(ctx)
			e.busy(false)
			e.pruneCooling()
		}
	}
}

// nextDue returns when the next retry not yet queued, or end of a
// deferred pod's cooling, is due; zero if none is pending.
func (e *Evented) nextDue() time.Time {
	var next time.Time
	for _, r := range e.retries {
		if r.queued {
			continue
		}
		if next.IsZero() || r.due.Before(next) {
			next = r.due
		}
	}
	for uid := range e.deferred {
		if until := e.cooling[uid]; next.IsZero() || until.Before(next) {
			next = until
		}
	}
	return next
}

// pruneCooling forgets the coolings that ended, of pods that sent no
// event since.
func (e *Evented) pruneCooling() {
	now := e.cfg.Clock.Now()
	for uid, until := range e.cooling {
		if !until.After(now) {
			if _, ok := e.deferred[uid]; !ok {
				delete(e.cooling, uid)
			}
		}
	}
}

// establish waits until the runtime has accepted the subscription (the
// streamer reported it established, or an event came) and has not
// refused it for settleTime. Meanwhile it relists every RelistPeriod, as
// without a stream. It returns the stream's error, or ctx's.
func (e *Evented) establish(ctx context.Context, errc <-chan error, established <-chan struct{}) error {
	relists := e.cfg.Clock.NewTicker(e.cfg.RelistPeriod)
	defer relists.Stop()
wait:
	for {
		select {
		case err := <-errc:
			return fmt.Errorf("pleg: container events: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-established:
			break wait
		case <-e.queue.ready:
			e.queue.signal() // put it back for the inspector
			return nil
		case <-relists.C():
			e.relist(ctx)
		}
	}
	return e.awaitEvent(ctx, errc, settleTime)
}

// awaitEvent waits for d, or until an event is queued (which it leaves
// queued for the inspector); it returns the stream's error or ctx's if
// either comes first.
func (e *Evented) awaitEvent(ctx context.Context, errc <-chan error, d time.Duration) error {
	t := e.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-errc:
		return fmt.Errorf("pleg: container events: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	case <-e.queue.ready:
		e.queue.signal() // put it back for the inspector
	case <-t.C():
	}
	return nil
}

// catchUp relists once more, RelistPeriod after the stream was
// established, or as soon as an event shows the subscription in place. A
// runtime may take longer than settleTime to put the subscription in
// place (over gRPC, "established" only means that the request was sent),
// and what happens meanwhile comes as no event: this relist finds it.
// Events received meanwhile wait in the queue.
func (e *Evented) catchUp(ctx context.Context, errc <-chan error) error {
	if err := e.awaitEvent(ctx, errc, e.cfg.RelistPeriod); err != nil {
		return err
	}
	e.relist(ctx)
	return nil
}

// queueDueRetries queues the pods whose retry is due, and the deferred
// pods whose cooling ended.
func (e *Evented) queueDueRetries() {
	now := e.cfg.Clock.Now()
	for uid, r := range e.retries {
		if !r.queued && !r.due.After(now) {
			r.queued = true
			e.queue.add(uid, r.ref, now, false)
		}
	}
	for uid, until := range e.cooling {
		if until.After(now) {
			continue
		}
		delete(e.cooling, uid)
		if ref, ok := e.deferred[uid]; ok {
			delete(e.deferred, uid)
			e.queue.add(uid, ref, now, false)
		}
	}
}

// inspect observes one pod: it updates the cache and the pod's record,
// and emits an event for each container or sandbox whose state differs
// from the record (what the last relist or inspection saw). A failed
// inspection leaves the error in the cache beside the last status, keeps
// the record, and schedules a retry with back-off; a pod with nothing
// left in the runtime is forgotten.
func (e *Evented) inspect(ctx context.Context, uid types.UID, ref podRef) {
	e.queue.begin(uid)
	start := e.cfg.Clock.Now()
	var status *runtime.PodStatus
	err := e.generic.guard("inspecting a pod", func() (err error) {
		status, err = e.cfg.Runtime.GetPodStatus(ctx, uid, ref.name, ref.namespace)
		return err
	})
	if took := e.cfg.Clock.Since(start); err == nil && took >= coolMin {
		e.cooling[uid] = e.cfg.Clock.Now().Add(min(coolFactor*took, coolMax))
	} else {
		delete(e.cooling, uid)
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		e.cfg.Logger.Error(err, "inspecting pod", "pod", ref.namespace+"/"+ref.name, "podUID", uid)
		e.backOff(uid, ref)
		e.queue.finish(uid, func(pending time.Time) { e.cfg.Cache.observe(uid, nil, err, start, false, pending) })
		e.generic.recordFailure(uid, ref)
		return
	}
	delete(e.retries, uid)
	cur := statesOf(status)
	e.queue.finish(uid, func(pending time.Time) { e.cfg.Cache.observe(uid, status, nil, start, len(cur) == 0, pending) })
	prev := e.generic.recordInspection(uid, ref, cur)
	e.generic.send(ctx, diff(uid, prev, cur))
}

// statesOf returns the state of each container and sandbox of a status,
// by ID, as a relist records them.
func statesOf(s *runtime.PodStatus) map[string]runtime.ContainerState {
	if s == nil {
		return nil
	}
	out := make(map[string]runtime.ContainerState, len(s.ContainerStatuses)+len(s.SandboxStatuses))
	for _, c := range s.ContainerStatuses {
		out[c.ID.ID] = c.State
	}
	for _, sb := range s.SandboxStatuses {
		if sb.State == runtime.SandboxStateReady {
			out[sb.ID] = runtime.ContainerStateRunning
		} else {
			out[sb.ID] = runtime.ContainerStateExited
		}
	}
	return out
}

// touch records that the runtime was observed now, for Healthy.
func (g *Generic) touch() {
	g.mu.Lock()
	g.lastRelist = g.cfg.Clock.Now()
	g.mu.Unlock()
}

// reinspectAtNextRelist makes the next relist inspect the pods, changed
// or not. Pods it has no record of are inspected anyway if listed.
func (g *Generic) reinspectAtNextRelist(uids []types.UID) {
	if len(uids) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, uid := range uids {
		if rec, ok := g.records[uid]; ok {
			rec.reinspect = true
			g.records[uid] = rec
		}
	}
}

// recordInspection records what a successful inspection found of a pod
// (nothing: the pod is forgotten) and returns the states recorded
// before.
func (g *Generic) recordInspection(uid types.UID, ref podRef, states map[string]runtime.ContainerState) map[string]runtime.ContainerState {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.records[uid].states
	if len(states) == 0 {
		delete(g.records, uid)
	} else {
		g.records[uid] = podRecord{name: ref.name, namespace: ref.namespace, states: states}
	}
	return prev
}

// recordFailure records that an inspection of the pod failed: the record
// keeps what was last seen, and the next relist inspects the pod again.
func (g *Generic) recordFailure(uid types.UID, ref podRef) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rec := g.records[uid]
	rec.name, rec.namespace, rec.reinspect = ref.name, ref.namespace, true
	g.records[uid] = rec
}
