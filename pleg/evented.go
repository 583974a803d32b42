package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// EventStreamer is the CRI event stream; every
// k8s.io/cri-api/pkg/apis.RuntimeService has it (runtime/cri.Client,
// fakecri.Runtime), though not every runtime serves it (containerd 1.6
// does not).
type EventStreamer interface {
	GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

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
}

// Evented generates events from the CRI container event stream: each
// event makes it inspect that pod alone (GetPodStatus), update the cache
// and emit the matching pod lifecycle event, so a change is seen within
// milliseconds and an idle node costs nothing but a tick a second. It
// relists at start and every SafetyRelistPeriod; when the stream is
// refused (Unimplemented) or breaks it falls back to relisting every
// RelistPeriod and tries the stream again every RetryPeriod.
type Evented struct {
	cfg     EventedConfig
	generic *Generic

	// mu guards streaming.
	mu        sync.Mutex
	streaming bool
}

var _ Generator = (*Evented)(nil)

// NewEvented returns an evented generator.
func NewEvented(cfg EventedConfig) (*Evented, error) {
	if cfg.Streamer == nil {
		return nil, errors.New("pleg: EventedConfig.Streamer is required")
	}
	if cfg.SafetyRelistPeriod <= 0 {
		cfg.SafetyRelistPeriod = 5 * time.Minute
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = 10 * time.Second
	}
	g, err := NewGeneric(cfg.Config)
	if err != nil {
		return nil, err
	}
	cfg.Config = g.cfg
	return &Evented{cfg: cfg, generic: g}, nil
}

// Watch implements Generator.
func (e *Evented) Watch() <-chan *Event { return e.generic.Watch() }

// Healthy implements Generator: healthy while the stream is up, or while
// the fallback relists are current.
func (e *Evented) Healthy() error {
	e.mu.Lock()
	streaming := e.streaming
	e.mu.Unlock()
	if streaming {
		return nil
	}
	return e.generic.Healthy()
}

// Streaming reports whether the event stream is up.
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
		if ctx.Err() != nil {
			return nil
		}
		e.cfg.Logger.Info("the container event stream is unavailable; relisting", "err", err, "retryIn", e.cfg.RetryPeriod)
		if !e.relistFor(ctx, e.cfg.RetryPeriod) {
			return nil
		}
	}
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

// stream consumes the event stream until it fails or ctx ends.
func (e *Evented) stream(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, e.cfg.EventBuffer)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		errc <- e.cfg.Streamer.GetContainerEvents(sctx, ch, nil)
	}()
	defer wg.Wait()
	defer cancel()

	// The stream counts as up once it has not failed for a moment.
	settle := e.cfg.Clock.NewTimer(100 * time.Millisecond)
	defer settle.Stop()
	select {
	case err := <-errc:
		return fmt.Errorf("pleg: container events: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	case ev := <-ch:
		e.setStreaming(true)
		e.handle(ctx, ch, ev)
	case <-settle.C():
		e.setStreaming(true)
	}
	// Relist once now the stream is up, to catch what happened before.
	e.generic.Relist(ctx)

	tick := e.cfg.Clock.NewTicker(time.Second)
	defer tick.Stop()
	safety := e.cfg.Clock.NewTicker(e.cfg.SafetyRelistPeriod)
	defer safety.Stop()
	for {
		select {
		case err := <-errc:
			return fmt.Errorf("pleg: container events: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-ch:
			e.handle(ctx, ch, ev)
		case <-tick.C():
			// No event pending: every pod's entry is current.
			if len(ch) == 0 {
				e.cfg.Cache.UpdateTime(e.cfg.Clock.Now())
				e.generic.touch()
			}
		case <-safety.C():
			e.generic.Relist(ctx)
		}
	}
}

// handle processes an event and every other one already queued,
// inspecting each pod once.
func (e *Evented) handle(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, first *runtimeapi.ContainerEventResponse) {
	type podRef struct{ name, namespace string }
	pods := map[types.UID]podRef{}
	var events []*Event
	add := func(ev *runtimeapi.ContainerEventResponse) {
		m := ev.GetPodSandboxStatus().GetMetadata()
		if m.GetUid() == "" {
			return
		}
		uid := types.UID(m.GetUid())
		pods[uid] = podRef{m.GetName(), m.GetNamespace()}
		var typ EventType
		switch ev.GetContainerEventType() {
		case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
			typ = ContainerStarted
		case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
			typ = ContainerDied
		case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
			typ = ContainerRemoved
		default:
			typ = ContainerChanged
		}
		events = append(events, &Event{ID: uid, Type: typ, Data: ev.GetContainerId()})
	}
	add(first)
	for more := true; more; {
		select {
		case ev := <-ch:
			add(ev)
		default:
			more = false
		}
	}
	start := e.cfg.Clock.Now()
	for uid, ref := range pods {
		status, err := e.cfg.Runtime.GetPodStatus(ctx, uid, ref.name, ref.namespace)
		if err != nil && ctx.Err() == nil {
			e.cfg.Logger.Error(err, "inspecting pod", "pod", ref.namespace+"/"+ref.name, "podUID", uid)
		}
		if err == nil && len(status.SandboxStatuses) == 0 && len(status.ContainerStatuses) == 0 {
			e.cfg.Cache.Delete(uid)
			continue
		}
		e.cfg.Cache.Set(uid, status, err, start)
	}
	e.generic.send(ctx, events)
}

// touch records that the runtime was observed now, for Healthy.
func (g *Generic) touch() {
	g.mu.Lock()
	g.lastRelist = g.cfg.Clock.Now()
	g.mu.Unlock()
}
