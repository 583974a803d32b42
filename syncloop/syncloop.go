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
//   - every SyncPeriod (1 s) the pods whose resync is due → HandlePodSyncs;
//   - every HousekeepingPeriod (2 s) → HandlePodCleanups.
//
// A closed Updates stream ends Run with an error; a closed Events or
// ProbeUpdates channel is dropped and the loop goes on with the rest.
// Handlers must not block for long: the pod workers do the real work.
package syncloop

import (
	"context"
	"errors"
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
	// Due returns the pods whose resync is due (podworkers.Due). Optional.
	Due func(now time.Time) []types.UID
	// Lookup finds a known pod by UID. Required.
	Lookup func(types.UID) (*v1.Pod, bool)
	// SyncPeriod: how often due pods are collected. Default 1s.
	SyncPeriod time.Duration
	// HousekeepingPeriod: how often HandlePodCleanups runs. Default 2s.
	HousekeepingPeriod time.Duration
	Clock              clock.WithTicker
	Logger             logr.Logger
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
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = time.Second
	}
	if cfg.HousekeepingPeriod <= 0 {
		cfg.HousekeepingPeriod = 2 * time.Second
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
	syncTick := l.cfg.Clock.NewTicker(l.cfg.SyncPeriod)
	defer syncTick.Stop()
	house := l.cfg.Clock.NewTicker(l.cfg.HousekeepingPeriod)
	defer house.Stop()
	h := l.cfg.Handler
	events, probeUpdates := l.cfg.Events, l.cfg.ProbeUpdates
	for {
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
			if e.Type == pleg.ContainerRemoved {
				continue
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
			h.HandleProbeUpdate(ctx, u)
			// As the kubelet: a liveness failure means a restart, and a
			// readiness or startup change may start the next container
			// or probe: sync now.
			if u.Type != probes.Liveness || u.Result == probes.Failure {
				if pod, ok := l.cfg.Lookup(u.PodUID); ok {
					h.HandlePodSyncs(ctx, []*v1.Pod{pod})
				}
			}
		case <-syncTick.C():
			if l.cfg.Due == nil {
				continue
			}
			var pods []*v1.Pod
			for _, uid := range l.cfg.Due(l.cfg.Clock.Now()) {
				if pod, ok := l.cfg.Lookup(uid); ok {
					pods = append(pods, pod)
				}
			}
			if len(pods) > 0 {
				h.HandlePodSyncs(ctx, pods)
			}
		case <-house.C():
			if err := h.HandlePodCleanups(ctx); err != nil && ctx.Err() == nil {
				l.cfg.Logger.Error(err, "housekeeping")
			}
		}
	}
}
