package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri/images"
	"github.com/nodekit/nodekit/status"
)

// EvictionConfig turns on the eviction manager and tunes it; see the
// eviction package. Zero fields are the kubelet's defaults.
type EvictionConfig struct {
	// Thresholds are the eviction thresholds (eviction.Parse reads the
	// kubelet's). Nil: eviction.DefaultHard.
	Thresholds []eviction.Threshold
	// MonitoringInterval is the time between passes. Default 10s.
	MonitoringInterval time.Duration
	// PressureTransitionPeriod is how long a pressure condition stays
	// after its threshold stopped being met. Default 5m.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds caps the grace period of a pod evicted
	// for a soft threshold. Default 0.
	MaxPodGracePeriodSeconds int64
	// DedicatedImageFs says images and the containers' writable layers
	// live on a filesystem of their own; SplitImageFs, that images do
	// while the writable layers stay on the node's filesystem (see
	// eviction.Config).
	DedicatedImageFs bool
	SplitImageFs     bool
	// ReclaimImages removes unused images when disk is short, before
	// pods are evicted. Default: the DeleteUnused of the agent's image
	// collector (Config.ImageGC), if any; else none (dead containers are
	// still removed first).
	ReclaimImages eviction.ReclaimFunc
}

// newEviction builds the eviction manager of Config.Eviction over the
// node server's stats provider.
func (a *Agent) newEviction() (*eviction.Manager, error) {
	ec := a.cfg.Eviction
	if ec == nil {
		return nil, nil
	}
	if a.stats == nil {
		return nil, errors.New("agent: Config.Eviction needs stats: Config.Server.Stats, or Config.RuntimeService")
	}
	reclaimImages := ec.ReclaimImages
	if reclaimImages == nil && a.imageGC != nil {
		reclaimImages = a.imageGC.DeleteUnused
	}
	m, err := eviction.New(eviction.Config{
		Summary:                  a.stats.Summary,
		ActivePods:               a.evictionCandidates,
		Kill:                     a.evictPod,
		PodCleanedUp:             func(p *v1.Pod) bool { return a.workers.ShouldPodContentBeRemoved(p.UID) },
		Thresholds:               ec.Thresholds,
		MonitoringInterval:       ec.MonitoringInterval,
		PressureTransitionPeriod: ec.PressureTransitionPeriod,
		MaxPodGracePeriodSeconds: ec.MaxPodGracePeriodSeconds,
		ReclaimContainers:        a.reclaimContainers,
		ReclaimImages:            reclaimImages,
		DedicatedImageFs:         ec.DedicatedImageFs,
		SplitImageFs:             ec.SplitImageFs,
		AllocatableMemory:        a.cfg.Allocatable[v1.ResourceMemory],
		Clock:                    a.cfg.Clock,
		Logger:                   a.cfg.Logger.WithName("eviction"),
		Events:                   a.cfg.Events,
		Registerer:               a.cfg.Registry,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: Config.Eviction: %w", err)
	}
	return m, nil
}

// newImageGC builds the image collector of Config.ImageGC over the CRI
// services, with the image filesystem's figures from the node server's
// stats.
func (a *Agent) newImageGC() (*images.GC, error) {
	if a.cfg.ImageGC == nil {
		return nil, nil
	}
	if a.cfg.ImageService == nil || a.cfg.RuntimeService == nil || a.stats == nil {
		return nil, errors.New("agent: Config.ImageGC needs Config.ImageService, Config.RuntimeService and stats")
	}
	c := *a.cfg.ImageGC
	c.Images, c.Containers, c.Clock, c.Logger = a.cfg.ImageService, a.cfg.RuntimeService, a.cfg.Clock, a.cfg.Logger.WithName("imagegc")
	stats := a.stats
	c.FsUsage = func(ctx context.Context) (uint64, uint64, error) {
		s, err := stats.Summary(ctx)
		if err != nil {
			return 0, 0, err
		}
		if s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil || s.Node.Runtime.ImageFs.CapacityBytes == nil || s.Node.Runtime.ImageFs.AvailableBytes == nil {
			return 0, 0, errors.New("the stats summary has no image filesystem capacity")
		}
		return *s.Node.Runtime.ImageFs.CapacityBytes, *s.Node.Runtime.ImageFs.AvailableBytes, nil
	}
	gc, err := images.NewGC(c)
	if err != nil {
		return nil, fmt.Errorf("agent: Config.ImageGC: %w", err)
	}
	return gc, nil
}

// Pressure reports the node's pressure conditions, from the eviction
// manager; all false without Config.Eviction. kube.ConditionsFunc adapts
// it for the node status. It does not block; safe for concurrent use.
func (a *Agent) Pressure() (memory, disk, pid bool) {
	if a.evict == nil {
		return false, false, false
	}
	return a.evict.Pressure()
}

// pressure feeds admission; the eviction manager is built after the
// admission chain.
func (a *Agent) pressure() (memory, disk, pid bool) { return a.Pressure() }

// evictionCandidates are the active pods not already failed by the agent
// nor being terminated.
func (a *Agent) evictionCandidates() []*v1.Pod {
	pods := a.activePods()
	out := pods[:0]
	for _, p := range pods {
		if _, failed := a.failedBy(p.UID); failed || a.workers.IsPodTerminationRequested(p.UID) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// evictPod records the pod Failed with reason Evicted, the message and,
// for a threshold eviction, a DisruptionTarget condition, and has its
// worker kill it within the grace period, as the kubelet's killPodNow
// does. It does not wait for the kill.
func (a *Agent) evictPod(_ context.Context, pod *v1.Pod, e eviction.Eviction) error {
	f := failure{Reason: status.Reason{Reason: eviction.Reason, Message: e.Message}}
	if e.DisruptionTarget != nil {
		f.disruption = e.DisruptionTarget.Message
	}
	a.mu.Lock()
	a.failed[pod.UID] = f
	a.mu.Unlock()
	grace := e.GracePeriod
	a.workers.UpdatePod(podworkers.UpdatePodOptions{
		UpdateType: podworkers.SyncPodKill, Pod: pod,
		Kill: &podworkers.KillPodOptions{GracePeriodOverride: &grace},
	})
	return nil
}

// reclaimContainers removes every dead container of the node, as the
// kubelet's DeleteAllUnusedContainers does under disk pressure.
func (a *Agent) reclaimContainers(ctx context.Context) error {
	gc, ok := a.rt.(runtime.GarbageCollector)
	if !ok {
		return nil
	}
	return a.collectContainers(ctx, gc, runtime.GCPolicy{})
}
