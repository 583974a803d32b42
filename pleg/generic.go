package pleg

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// Defaults of Config, the kubelet's.
const (
	DefaultRelistPeriod    = time.Second
	DefaultRelistThreshold = 3 * time.Minute
	DefaultEventBuffer     = 1000
)

// Config configures a relisting generator.
type Config struct {
	// Runtime is observed. Required.
	Runtime runtime.Runtime
	// Cache is kept current. Required.
	Cache *Cache
	// RelistPeriod is the pause between two relists. Default 1s.
	RelistPeriod time.Duration
	// RelistThreshold: Healthy fails when no relist completed for this
	// long. Default 3m.
	RelistThreshold time.Duration
	// EventBuffer is the Watch channel's capacity. Default 1000.
	EventBuffer int
	// Clock drives relists and health. Default: the real clock.
	Clock clock.WithTicker
	// Logger logs relist failures. Default: discard.
	Logger logr.Logger
	// Registerer receives the kubelet's PLEG metrics. Nil: not registered.
	Registerer prometheus.Registerer
}

func (c *Config) defaults() error {
	if c.Runtime == nil {
		return errors.New("pleg: Config.Runtime is required")
	}
	if c.Cache == nil {
		return errors.New("pleg: Config.Cache is required")
	}
	if c.RelistPeriod <= 0 {
		c.RelistPeriod = DefaultRelistPeriod
	}
	if c.RelistThreshold <= 0 {
		c.RelistThreshold = DefaultRelistThreshold
	}
	if c.EventBuffer <= 0 {
		c.EventBuffer = DefaultEventBuffer
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger.GetSink() == nil {
		c.Logger = logr.Discard()
	}
	return nil
}

// Generic is the relisting generator: every RelistPeriod it lists the
// runtime's pods once, compares each container's and sandbox's state with
// the previous relist, emits an event per change, and inspects in detail
// (GetPodStatus) only the pods that changed, or whose last inspection
// failed. A relist of unchanged pods costs the two CRI list calls and
// nothing more.
type Generic struct {
	cfg     Config
	events  chan *Event
	metrics *metrics

	// relistMu serializes relists (Run's loop, Relist, the evented
	// generator's); it guards spare and sparePeak.
	relistMu sync.Mutex
	// spare is the records map before last, for the next relist to fill
	// again; sparePeak and recordsPeak are the most pods each map has
	// held, as a map keeps the room it once needed.
	spare                  map[types.UID]podRecord
	sparePeak, recordsPeak int

	// mu guards the fields below. records is written only on the
	// goroutine that relists (the evented generator's updates run on
	// its own loop, which also relists), so a relist may read it
	// without mu.
	mu         sync.Mutex
	lastRelist time.Time
	// records: what was last seen of each pod, by a relist or (in the
	// evented generator) by an inspection; the next relist compares with
	// it.
	records map[types.UID]podRecord
}

// podRecord is what was last seen of one pod: the states of its
// containers and sandboxes, as the last relist listed them or the last
// successful inspection found them.
type podRecord struct {
	name, namespace string
	states          map[string]runtime.ContainerState // container or sandbox ID → state
	// reinspect: the pod's last inspection failed, or the evented
	// generator handed it over; the next relist inspects it, changed or
	// not.
	reinspect bool
}

// same reports whether p has exactly the recorded sandboxes and
// containers, each in the recorded state.
func (r podRecord) same(p *runtime.Pod) bool {
	if len(r.states) != len(p.Sandboxes)+len(p.Containers) {
		return false
	}
	for _, list := range [2][]*runtime.Container{p.Sandboxes, p.Containers} {
		for _, c := range list {
			if s, ok := r.states[c.ID.ID]; !ok || s != c.State {
				return false
			}
		}
	}
	return true
}

var _ Generator = (*Generic)(nil)

// NewGeneric returns a relisting generator.
func NewGeneric(cfg Config) (*Generic, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	g := &Generic{
		cfg:     cfg,
		events:  make(chan *Event, cfg.EventBuffer),
		metrics: m,
		records: map[types.UID]podRecord{},
	}
	return g, nil
}

// Watch implements Generator.
func (g *Generic) Watch() <-chan *Event { return g.events }

// Healthy implements Generator.
func (g *Generic) Healthy() error {
	g.mu.Lock()
	last := g.lastRelist
	g.mu.Unlock()
	if last.IsZero() {
		return nil // not started yet
	}
	if since := g.cfg.Clock.Since(last); since > g.cfg.RelistThreshold {
		return fmt.Errorf("pleg: the last relist completed %v ago; threshold is %v", since.Round(time.Second), g.cfg.RelistThreshold)
	}
	return nil
}

// Run implements Generator: it relists at once and then every
// RelistPeriod until ctx ends.
func (g *Generic) Run(ctx context.Context) error {
	t := g.cfg.Clock.NewTicker(g.cfg.RelistPeriod)
	defer t.Stop()
	for {
		g.Relist(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// Relist observes the runtime once. Run calls it; tests and the evented
// generator call it directly.
func (g *Generic) Relist(ctx context.Context) { g.relist(ctx) }

// relist observes the runtime once and returns the pods it inspected,
// each with whether the inspection failed.
func (g *Generic) relist(ctx context.Context) map[types.UID]inspection {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()
	start := g.cfg.Clock.Now()
	g.mu.Lock()
	old := g.records
	g.mu.Unlock()
	// current reuses the map of the relist before last, which nothing
	// refers to any more, unless it was made for far more pods.
	current, peak := g.spare, g.sparePeak
	if current == nil || peak > 4*len(old)+64 {
		current, peak = make(map[types.UID]podRecord, len(old)), 0
	}
	clear(current)
	var (
		events  []*Event
		changed []types.UID
		listed  int
		err     error
	)
	// visit compares one listed pod with its record. It runs while the
	// runtime lends it the pod (see runtime.PodVisitor): it copies what
	// it keeps and leaves the inspections for after the list.
	visit := func(p *runtime.Pod) {
		listed++
		prev, known := old[p.ID]
		if known && prev.same(p) {
			// Unchanged: no record to build and no event; inspected
			// again only if the last inspection failed.
			current[p.ID] = prev
			if prev.reinspect {
				changed = append(changed, p.ID)
			}
			return
		}
		rec := podRecord{name: p.Name, namespace: p.Namespace, states: make(map[string]runtime.ContainerState, len(p.Containers)+len(p.Sandboxes))}
		for _, list := range [2][]*runtime.Container{p.Sandboxes, p.Containers} {
			for _, c := range list {
				rec.states[c.ID.ID] = c.State
			}
		}
		podEvents := diff(p.ID, prev.states, rec.states)
		events = append(events, podEvents...)
		// A pod that has changed is inspected, as is one that is new or
		// whose last inspection failed.
		rec.reinspect = !known || len(podEvents) > 0 || prev.reinspect
		current[p.ID] = rec
		if rec.reinspect {
			changed = append(changed, p.ID)
		}
	}
	err = g.guard("listing pods", func() error {
		if v, ok := g.cfg.Runtime.(runtime.PodVisitor); ok {
			return v.VisitPods(ctx, true, visit)
		}
		pods, err := g.cfg.Runtime.GetPods(ctx, true)
		if err == nil {
			for _, p := range pods {
				visit(p)
			}
		}
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			g.cfg.Logger.Error(err, "relisting pods")
		}
		return nil
	}
	g.mu.Lock()
	g.lastRelist = start
	g.mu.Unlock()

	var inspected map[types.UID]inspection
	if len(changed) > 0 {
		inspected = make(map[types.UID]inspection, len(changed))
	}
	for _, uid := range changed {
		rec := current[uid]
		var status *runtime.PodStatus
		err := g.guard("inspecting a pod", func() (err error) {
			status, err = g.cfg.Runtime.GetPodStatus(ctx, uid, rec.name, rec.namespace)
			return err
		})
		rec.reinspect = err != nil
		current[uid] = rec
		inspected[uid] = inspection{ref: podRef{rec.name, rec.namespace}, failed: err != nil}
		if err != nil && ctx.Err() == nil {
			g.cfg.Logger.Error(err, "inspecting pod", "pod", rec.namespace+"/"+rec.name, "podUID", uid)
		}
		g.cfg.Cache.Set(uid, status, err, start)
	}
	for uid, prev := range old {
		if _, ok := current[uid]; ok {
			continue
		}
		events = append(events, diff(uid, prev.states, nil)...)
		g.cfg.Cache.Delete(uid, start)
	}
	g.cfg.Cache.UpdateTime(start)

	g.mu.Lock()
	g.records = current
	g.mu.Unlock()
	g.spare, g.sparePeak, g.recordsPeak = old, g.recordsPeak, max(peak, len(current))

	g.send(ctx, events)
	g.metrics.observe(start, g.cfg.Clock.Since(start), listed)
	return inspected
}

// guard runs a runtime call and turns a panic in it into its error,
// logged with the stack and counted in nodekit_pleg_runtime_panics_total,
// so that a runtime's bug fails one call, as an error would, instead of
// the agent.
func (g *Generic) guard(what string, call func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("pleg: %s: the runtime panicked: %v", what, v)
			g.metrics.panics.Inc()
			g.cfg.Logger.Error(err, "recovered a panic", "stack", string(debug.Stack()))
		}
	}()
	return call()
}

// inspection is the outcome of one relist's inspection of a pod.
type inspection struct {
	ref    podRef
	failed bool
}

// diff turns one pod's container state changes into events, as the
// kubelet's generateEvents does. The created state counts as unknown.
func diff(uid types.UID, old, cur map[string]runtime.ContainerState) []*Event {
	var out []*Event
	for id, now := range cur {
		before, had := old[id]
		if had && norm(before) == norm(now) {
			continue
		}
		switch norm(now) {
		case runtime.ContainerStateRunning:
			out = append(out, &Event{ID: uid, Type: ContainerStarted, Data: id})
		case runtime.ContainerStateExited:
			out = append(out, &Event{ID: uid, Type: ContainerDied, Data: id})
		default:
			out = append(out, &Event{ID: uid, Type: ContainerChanged, Data: id})
		}
	}
	for id, before := range old {
		if _, ok := cur[id]; ok {
			continue
		}
		if norm(before) != runtime.ContainerStateExited {
			out = append(out, &Event{ID: uid, Type: ContainerDied, Data: id})
		}
		out = append(out, &Event{ID: uid, Type: ContainerRemoved, Data: id})
	}
	return out
}

func norm(s runtime.ContainerState) runtime.ContainerState {
	if s == runtime.ContainerStateCreated {
		return runtime.ContainerStateUnknown
	}
	return s
}

// send delivers events in order. When the channel is full it waits for
// the consumer instead of dropping: a dropped event would leave its pod
// unsynced until the next periodic resync (a minute), and the sync loop
// drains the channel quickly. Events left when ctx ends are counted as
// discarded.
func (g *Generic) send(ctx context.Context, events []*Event) {
	for i, ev := range events {
		select {
		case g.events <- ev:
		case <-ctx.Done():
			g.metrics.discarded.Add(float64(len(events) - i))
			return
		}
	}
}
