// Package syncloop is the agent's main loop, the kubelet's syncLoop: it
// merges pod updates from the sources, lifecycle events from the PLEG,
// due resyncs and periodic housekeeping, and dispatches each to a
// Handler.
//
// Dispatch rules, the kubelet's:
//   - source updates: ADD → HandlePodAdditions, UPDATE and DELETE →
//     HandlePodUpdates, REMOVE → HandlePodRemoves, RECONCILE →
//     HandlePodReconcile;
//   - a PLEG event for a known pod → HandlePodSyncs (ContainerRemoved
//     events are not worth a sync);
//   - a probe result change → HandleProbeUpdate, and for a liveness
//     failure or any readiness or startup change also HandlePodSyncs, so
//     a restart comes at once, and so does the next container after a
//     sidecar's startup probe succeeds;
//   - the pods whose resync is due → HandlePodSyncs, on the SyncPeriod
//     (1 s) grid (below);
//   - every HousekeepingPeriod (2 s) → HandlePodCleanups; while the
//     node is quiet, every QuietHousekeepingPeriod (below).
//
// # Resyncs
//
// The kubelet asks every second which pods are due (its sync ticker).
// This loop collects them at the same moments, the ticks of a SyncPeriod
// grid counted from Run's start, each due pod at the first tick at or
// after its due time, so a pod is resynced at most SyncPeriod late and
// pods due within one period go in one batch, as with the kubelet. But it
// wakes only on the ticks where a pod is due: with Config.NextDue it sets
// one timer to the tick of the earliest due time, and Config.DueChanged
// tells it when an earlier due time appears (a sync that failed and is
// retried after its back-off, an active deadline), so it sets the timer
// again. An idle node whose pods resync once a minute wakes the loop for
// those resyncs only, not every second. SyncPeriod is thus the grain of
// resync times and the least time between two collections, not a period
// the loop wakes on. Without NextDue, the loop asks Due on every tick, as
// a ticker would.
//
// # Quiet housekeeping
//
// Housekeeping acts on what changed: pods no source wants any more,
// workers that finished, orphans the runtime shows, resizes that wait.
// With Config.Quiet, the loop asks after each pass whether anything of
// that is left; while nothing is, the next pass is QuietHousekeepingPeriod
// (20 s) away instead of HousekeepingPeriod. Anything else the loop
// dispatches (a source update, a PLEG event, of a pod no source has too,
// a probe result; not a resync, which leaves housekeeping nothing) can
// start such work, so it brings passes back to every HousekeepingPeriod:
// what housekeeping does after a change it does within two seconds, as
// the kubelet. What no dispatch announces (a directory put under the pods
// directory by hand) is found at the next quiet pass. An idle node thus
// wakes for housekeeping every 20 s, not every 2 s.
//
// A closed Updates stream ends Run with an error; a closed Events or
// ProbeUpdates channel is dropped and the loop goes on with the rest.
// Handlers must not block for long: the pod workers do the real work.
package syncloop

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/probes"
)

// Handler receives what the loop dispatches.
type Handler interface {
	HandlePodAdditions(ctx context.Context, pods []*v1.Pod)
	HandlePodUpdates(ctx context.Context, pods []*v1.Pod)
	HandlePodRemoves(ctx context.Context, pods []*v1.Pod)
	HandlePodReconcile(ctx context.Context, pods []*v1.Pod)
	HandlePodSyncs(ctx context.Context, pods []*v1.Pod)
	HandlePodCleanups(ctx context.Context) error
	// HandleProbeUpdate receives a change of a probe result.
	HandleProbeUpdate(ctx context.Context, u probes.Update)
}

// Config configures the loop.
type Config struct {
	// Handler receives the work. Required.
	Handler Handler
	// Updates is the merged source stream. Required.
	Updates <-chan podsource.Update
	// Events are the PLEG's events. Optional.
	Events <-chan *pleg.Event
	// ProbeUpdates are the probes' result changes. Optional.
	ProbeUpdates <-chan probes.Update
	// Due returns the pods whose resync is due at now, and forgets
	// them (podworkers.Due). Optional: without it no pod is resynced.
	Due func(now time.Time) []types.UID
	// NextDue returns the earliest time at which Due reports a pod, and
	// false when none is due at any time (podworkers.NextDue). Optional,
	// with DueChanged: the loop then calls Due only on the SyncPeriod
	// ticks where a pod is due. Without it, Due is called on every tick.
	NextDue func() (time.Time, bool)
	// DueChanged receives when a pod became due earlier than NextDue
	// last said (podworkers.DueChanged); the loop then asks NextDue
	// again. Required with NextDue, ignored without it.
	DueChanged <-chan struct{}
	// Lookup finds a known pod by UID. Required.
	Lookup func(types.UID) (*v1.Pod, bool)
	// SyncPeriod is the grain of resyncs: due pods are collected on the
	// ticks of a SyncPeriod grid from Run's start, each at the first
	// tick at or after its due time, and only on ticks where one is due
	// when NextDue is set (see the package doc). Default 1s, the
	// kubelet's sync ticker.
	SyncPeriod time.Duration
	// HousekeepingPeriod: how often HandlePodCleanups runs. Default 2s.
	HousekeepingPeriod time.Duration
	// Quiet is asked after each HandlePodCleanups whether it left nothing
	// to do (see the package doc). Optional: without it every pass is
	// HousekeepingPeriod apart.
	Quiet func() bool
	// QuietHousekeepingPeriod is how far apart passes are while Quiet
	// holds and nothing else is dispatched; at least HousekeepingPeriod.
	// Default 20s.
	QuietHousekeepingPeriod time.Duration
	Clock                   clock.WithTicker
	Logger                  logr.Logger
}

// Loop is the sync loop.
type Loop struct {
	cfg Config
}

// New returns a loop; it starts nothing.
func New(cfg Config) (*Loop, error) {
	if cfg.Handler == nil || cfg.Updates == nil || cfg.Lookup == nil {
		return nil, errors.New("syncloop: Config.Handler, Config.Updates and Config.Lookup are required")
	}
	if cfg.NextDue != nil && (cfg.Due == nil || cfg.DueChanged == nil) {
		return nil, errors.New("syncloop: Config.NextDue needs Config.Due and Config.DueChanged")
	}
	if cfg.NextDue == nil {
		cfg.DueChanged = nil // ignored: every tick is collected
	}
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = time.Second
	}
	if cfg.HousekeepingPeriod <= 0 {
		cfg.HousekeepingPeriod = 2 * time.Second
	}
	if cfg.QuietHousekeepingPeriod <= 0 {
		cfg.QuietHousekeepingPeriod = 20 * time.Second
	}
	if cfg.QuietHousekeepingPeriod < cfg.HousekeepingPeriod {
		cfg.QuietHousekeepingPeriod = cfg.HousekeepingPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &Loop{cfg: cfg}, nil
}

// Run dispatches until ctx ends. It returns nil when ctx ends, and an
// error when the Updates stream is closed (no source can reach the pods
// any more, as the kubelet's loop ends then). A closed Events or
// ProbeUpdates channel is only dropped from the loop.
func (l *Loop) Run(ctx context.Context) error {
	resync := resyncTimer{clk: l.cfg.Clock, period: l.cfg.SyncPeriod, origin: l.cfg.Clock.Now()}
	defer resync.stop()
	l.arm(&resync)
	house := houseTimer{clk: l.cfg.Clock, period: l.cfg.HousekeepingPeriod, quiet: l.cfg.QuietHousekeepingPeriod}
	house.busy()
	defer house.stop()
	h := l.cfg.Handler
	events, probeUpdates := l.cfg.Events, l.cfg.ProbeUpdates
	for {
		busy := false // something was dispatched
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-l.cfg.Updates:
			if !ok {
				if ctx.Err() != nil {
					return nil // the sources stopped with the agent
				}
				return errors.New("syncloop: the pod update stream was closed")
			}
			busy = true
			switch u.Op {
			case podsource.ADD:
				h.HandlePodAdditions(ctx, u.Pods)
			case podsource.UPDATE, podsource.DELETE:
				h.HandlePodUpdates(ctx, u.Pods)
			case podsource.REMOVE:
				h.HandlePodRemoves(ctx, u.Pods)
			case podsource.RECONCILE:
				h.HandlePodReconcile(ctx, u.Pods)
			}
		case e, ok := <-events:
			if !ok {
				l.cfg.Logger.Info("the lifecycle event stream was closed")
				events = nil // a nil channel is never selected
				continue
			}
			// Any event, of a pod no source has too (an orphan), may
			// leave housekeeping work.
			busy = true
			if e.Type == pleg.ContainerRemoved {
				break
			}
			if pod, ok := l.cfg.Lookup(e.ID); ok {
				h.HandlePodSyncs(ctx, []*v1.Pod{pod})
			}
		case u, ok := <-probeUpdates:
			if !ok {
				l.cfg.Logger.Info("the probe result stream was closed")
				probeUpdates = nil
				continue
			}
			busy = true
			h.HandleProbeUpdate(ctx, u)
			// As the kubelet: a liveness failure means a restart, and a
			// readiness or startup change may start the next container
			// or probe: sync now.
			if u.Type != probes.Liveness || u.Result == probes.Failure {
				if pod, ok := l.cfg.Lookup(u.PodUID); ok {
					h.HandlePodSyncs(ctx, []*v1.Pod{pod})
				}
			}
		case <-l.cfg.DueChanged:
			l.arm(&resync)
		case <-resync.c:
			resync.fired()
			var pods []*v1.Pod
			for _, uid := range l.cfg.Due(l.cfg.Clock.Now()) {
				if pod, ok := l.cfg.Lookup(uid); ok {
					pods = append(pods, pod)
				}
			}
			if len(pods) > 0 {
				// Not busy: a resync of a pod a source wants leaves
				// housekeeping nothing (an idle node's pods resync
				// at spread times, and would keep it at 2 s).
				h.HandlePodSyncs(ctx, pods)
			}
			l.arm(&resync)
		case <-house.c():
			err := h.HandlePodCleanups(ctx)
			if err != nil && ctx.Err() == nil {
				l.cfg.Logger.Error(err, "housekeeping")
			}
			if err == nil && l.cfg.Quiet != nil && l.cfg.Quiet() {
				house.sleep()
			} else {
				house.busy()
			}
		}
		if busy {
			// What was dispatched may leave housekeeping work: the
			// next pass is HousekeepingPeriod away at most.
			house.busy()
		}
	}
}

// houseTimer paces housekeeping: a ticker of HousekeepingPeriod while
// the node is busy, a timer of QuietHousekeepingPeriod while it is quiet.
// It is used by Run's goroutine only.
type houseTimer struct {
	clk           clock.WithTicker
	period, quiet time.Duration
	ticker        clock.Ticker // nil while quiet
	timer         clock.Timer  // nil while busy
}

func (h *houseTimer) c() <-chan time.Time {
	if h.ticker != nil {
		return h.ticker.C()
	}
	return h.timer.C()
}

// busy makes passes HousekeepingPeriod apart, from now unless they are.
func (h *houseTimer) busy() {
	if h.ticker != nil {
		return
	}
	h.stop()
	h.ticker = h.clk.NewTicker(h.period)
}

// sleep makes the next pass QuietHousekeepingPeriod from now.
func (h *houseTimer) sleep() {
	h.stop()
	h.timer = h.clk.NewTimer(h.quiet)
}

func (h *houseTimer) stop() {
	if h.ticker != nil {
		h.ticker.Stop()
		h.ticker = nil
	}
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
}

// arm sets the resync timer to the next tick where a pod is due: the
// tick of NextDue's time, and never before the first tick after now, so
// that one tick collects once. Without NextDue every tick is armed, and
// without Due none is.
func (l *Loop) arm(r *resyncTimer) {
	if l.cfg.Due == nil {
		return
	}
	now := r.clk.Now()
	at := r.tickAfter(now)
	if l.cfg.NextDue != nil {
		next, ok := l.cfg.NextDue()
		if !ok {
			r.stop()
			return
		}
		at = latest(at, r.tickAtOrAfter(next))
	}
	r.set(at)
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// resyncTimer is the loop's one timer for resyncs, set to ticks of a
// grid of period from origin. It is used by Run's goroutine only.
type resyncTimer struct {
	clk    clock.WithTicker
	period time.Duration
	origin time.Time

	t  clock.Timer      // nil: not set, or fired
	c  <-chan time.Time // t's channel; nil (never ready) when t is nil
	at time.Time        // the tick t is set to
}

// tickAfter returns the first tick strictly after now.
func (r *resyncTimer) tickAfter(now time.Time) time.Time {
	if now.Before(r.origin) {
		return r.origin.Add(r.period)
	}
	return r.origin.Add((now.Sub(r.origin)/r.period + 1) * r.period)
}

// tickAtOrAfter returns the first tick at or after t.
func (r *resyncTimer) tickAtOrAfter(t time.Time) time.Time {
	if !t.After(r.origin) {
		return r.origin
	}
	d := t.Sub(r.origin)
	if d > math.MaxInt64-r.period {
		return t // centuries away (Sub saturates): no tick to round to
	}
	return r.origin.Add((d + r.period - 1) / r.period * r.period)
}

// set makes the timer fire at at, unless it is already set to it.
func (r *resyncTimer) set(at time.Time) {
	if r.t != nil && r.at.Equal(at) {
		return
	}
	r.stop()
	// A new timer rather than Reset: a stopped timer's channel may hold a
	// stale value on some clocks, and this runs once per wake-up at most.
	r.t = r.clk.NewTimer(at.Sub(r.clk.Now()))
	r.c, r.at = r.t.C(), at
}

// fired forgets the timer whose value Run received.
func (r *resyncTimer) fired() { r.t, r.c = nil, nil }

func (r *resyncTimer) stop() {
	if r.t != nil {
		r.t.Stop()
	}
	r.t, r.c = nil, nil
}
