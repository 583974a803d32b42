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

	"github.com/nodekit/nodekit/runtime"
)

// EventStreamer is the CRI event stream; every
// k8s.io/cri-api/pkg/apis.RuntimeService has it (runtime/cri.Client,
// fakecri.Runtime), though not every runtime serves it (containerd 1.6
// does not).
type EventStreamer interface {
	GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// streamBuffer is the capacity of the channel the CRI stream is read
// into. The reader moves each event into the pod queue at once, so it
// need not be large.
const streamBuffer = 16

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
	// InspectBackOffMax. Defaults 1s and 30s. Retries are due on the
	// generator's one-second tick, so delays are rounded up to it.
	InspectBackOff    time.Duration
	InspectBackOffMax time.Duration
}

// Evented generates events from the CRI container event stream: an
// event queues its pod for inspection (GetPodStatus); the inspection
// updates the cache and emits an event per container or sandbox whose
// state differs from the pod's previous cached status, so a change is
// seen within milliseconds and an idle node costs nothing but a tick a
// second. It relists at start and every SafetyRelistPeriod; when the
// stream is refused (Unimplemented) or breaks it falls back to relisting
// every RelistPeriod and tries the stream again every RetryPeriod.
//
// The stream is read on its own goroutine into a queue of pod UIDs: a
// pod is queued once however many events name it, and the events
// themselves (each carrying every container's status of its pod) are
// dropped as soon as read. Memory is bounded by the number of pods, and
// a slow inspection never holds up the stream. A pod whose inspection
// fails keeps the error in the cache and is inspected again with
// back-off until an inspection succeeds or the pod is gone. A pod whose
// inspection is slow (10 ms or more) waits four times as long before the
// next one.
type Evented struct {
	cfg     EventedConfig
	generic *Generic
	queue   *podQueue

	// retries, cooling and deferred belong to Run's goroutine.
	retries map[types.UID]*retry
	// cooling: pods whose last inspection took long, not to be inspected
	// again before the time given.
	cooling map[types.UID]time.Time
	// deferred: pods taken from the queue while cooling, queued again on
	// the tick after their cooling ends.
	deferred map[types.UID]podRef

	// mu guards streaming.
	mu        sync.Mutex
	streaming bool
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
	return &Evented{cfg: cfg, generic: g, queue: newPodQueue(), retries: map[types.UID]*retry{},
		cooling: map[types.UID]time.Time{}, deferred: map[types.UID]podRef{}}, nil
}

// Watch implements Generator.
func (e *Evented) Watch() <-chan *Event { return e.generic.Watch() }

// Healthy implements Generator: healthy while the generator's loop
// turns, by the relisting generator's threshold: while streaming, the
// loop marks itself current every second; otherwise the fallback relists
// do. An inspection stuck in the runtime makes it unhealthy either way.
func (e *Evented) Healthy() error {
	return e.generic.Healthy()
}

// Streaming reports whether the event stream is up: it has stood for a
// moment (or delivered an event) and the relist that follows is done.
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
	e.generic.Relist(ctx)
	for {
		err := e.stream(ctx)
		e.setStreaming(false)
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

// handOver gives the pods still queued or awaiting a retry to the
// relists, which inspect them at the next pass, now that the stream is
// down.
func (e *Evented) handOver() {
	var uids []types.UID
	for {
		uid, _, ok := e.queue.take()
		if !ok {
			break
		}
		uids = append(uids, uid)
	}
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
		e.generic.Relist(ctx)
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
// has returned (streamed closed). It never blocks on the inspector, and
// once ctx ends it drains and drops what the streamer still sends, so a
// streamer that sends without watching its context cannot block
// shutdown.
func (e *Evented) read(ctx context.Context, ch <-chan *runtimeapi.ContainerEventResponse, streamed <-chan struct{}) {
	for {
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
			e.queue.add(types.UID(strings.Clone(m.GetUid())), podRef{strings.Clone(m.GetName()), strings.Clone(m.GetNamespace())})
		}
	}
}

// stream consumes the event stream until it fails or ctx ends.
func (e *Evented) stream(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, streamBuffer)
	errc := make(chan error, 1)
	streamed := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(streamed)
		errc <- e.cfg.Streamer.GetContainerEvents(sctx, ch, nil)
	}()
	go func() {
		defer wg.Done()
		e.read(sctx, ch, streamed)
	}()
	defer wg.Wait()
	defer cancel()

	tick := e.cfg.Clock.NewTicker(time.Second)
	defer tick.Stop()
	safety := e.cfg.Clock.NewTicker(e.cfg.SafetyRelistPeriod)
	defer safety.Stop()

	// The stream counts as up once it has not failed for a moment, or
	// once it delivered an event.
	settle := e.cfg.Clock.NewTimer(100 * time.Millisecond)
	defer settle.Stop()
	select {
	case err := <-errc:
		return fmt.Errorf("pleg: container events: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	case <-e.queue.ready:
		e.queue.signal() // put it back for the loop below
	case <-settle.C():
	}
	// Relist once now the stream is up, to catch what happened before.
	e.generic.Relist(ctx)
	e.setStreaming(true)

	for {
		select {
		case err := <-errc:
			return fmt.Errorf("pleg: container events: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-e.queue.ready:
			// One pod per turn, so that ticks and errors are not held up
			// by a long queue.
			if uid, ref, ok := e.queue.take(); ok {
				if until, cool := e.cooling[uid]; cool && until.After(e.cfg.Clock.Now()) {
					e.deferred[uid] = ref
				} else {
					e.inspect(ctx, uid, ref)
				}
			}
			if e.queue.len() > 0 {
				e.queue.signal()
			}
		case <-tick.C():
			e.queueDueRetries()
			e.generic.touch()
			// Nothing pending or held back: every pod's entry is current.
			if e.queue.len() == 0 && len(e.deferred) == 0 {
				e.cfg.Cache.UpdateTime(e.cfg.Clock.Now())
			}
		case <-safety.C():
			e.generic.Relist(ctx)
		}
	}
}

// queueDueRetries queues the pods whose retry is due, and the deferred
// pods whose cooling ended.
func (e *Evented) queueDueRetries() {
	now := e.cfg.Clock.Now()
	for uid, r := range e.retries {
		if !r.due.After(now) {
			e.queue.add(uid, r.ref)
		}
	}
	for uid, until := range e.cooling {
		if until.After(now) {
			continue
		}
		delete(e.cooling, uid)
		if ref, ok := e.deferred[uid]; ok {
			delete(e.deferred, uid)
			e.queue.add(uid, ref)
		}
	}
}

// inspect observes one pod: it updates the cache and emits an event for
// each container or sandbox whose state differs from the pod's previous
// cached status. A failed inspection leaves the error in the cache and
// schedules a retry with back-off; a pod with nothing left in the
// runtime is forgotten.
func (e *Evented) inspect(ctx context.Context, uid types.UID, ref podRef) {
	start := e.cfg.Clock.Now()
	prev, _ := e.cfg.Cache.Get(uid)
	status, err := e.cfg.Runtime.GetPodStatus(ctx, uid, ref.name, ref.namespace)
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
		r := e.retries[uid]
		if r == nil {
			r = &retry{ref: ref, delay: e.cfg.InspectBackOff}
			e.retries[uid] = r
		} else {
			r.delay = min(2*r.delay, e.cfg.InspectBackOffMax)
		}
		r.due = e.cfg.Clock.Now().Add(r.delay)
		e.cfg.Cache.Set(uid, status, err, start)
		return
	}
	delete(e.retries, uid)
	cur := statesOf(status)
	if len(cur) == 0 {
		e.cfg.Cache.Delete(uid)
	} else {
		e.cfg.Cache.Set(uid, status, nil, start)
	}
	e.generic.send(ctx, diff(uid, statesOf(prev), cur))
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
// or not.
func (g *Generic) reinspectAtNextRelist(uids []types.UID) {
	if len(uids) == 0 {
		return
	}
	g.relistMu.Lock() // a relist in progress would overwrite the set
	defer g.relistMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reinspect == nil {
		g.reinspect = map[types.UID]bool{}
	}
	for _, uid := range uids {
		g.reinspect[uid] = true
	}
}
