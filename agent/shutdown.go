package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/status"
)

// The kubelet's words for a pod terminated by a node shutdown, and for
// a pod refused while the node shuts down.
const (
	ShutdownReason           = "Terminated"
	ShutdownMessage          = "Pod was terminated in response to imminent node shutdown."
	ShutdownRejectReason     = "NodeShutdown"
	ShutdownRejectMessage    = "Pod was rejected as the node is shutting down."
	shutdownCriticalPriority = 2000000000 // scheduling.SystemCriticalPriority
)

// ErrShuttingDown is what Agent.NodeHealth reports once Shutdown began.
var ErrShuttingDown = errors.New("node is shutting down")

// ShutdownConfig is how Agent.Shutdown terminates the pods: the
// kubelet's shutdownGracePeriod and shutdownGracePeriodCriticalPods, or
// its shutdownGracePeriodByPodPriority, which wins when set.
type ShutdownConfig struct {
	// GracePeriod is the whole time the shutdown may take; the regular
	// pods get GracePeriod − CriticalPodsGracePeriod, then the critical
	// ones (priority ≥ 2000000000) CriticalPodsGracePeriod.
	GracePeriod time.Duration
	// CriticalPodsGracePeriod is the critical pods' share of GracePeriod.
	CriticalPodsGracePeriod time.Duration
	// ByPodPriority groups the pods by priority threshold: a pod belongs
	// to the group of the highest Priority not above its own (the lowest
	// group for pods below every threshold). Groups are terminated from
	// the lowest priority up, each within its GracePeriodSeconds.
	ByPodPriority []ShutdownPriority
}

// ShutdownPriority is one group of ShutdownConfig.ByPodPriority.
type ShutdownPriority struct {
	// Priority is the lowest pod priority of the group.
	Priority int32
	// GracePeriodSeconds is the group's time: each pod's grace period is
	// capped to it, and the next group starts after it at the latest.
	GracePeriodSeconds int64
}

// validate checks the configuration as the kubelet's validation does.
func (c ShutdownConfig) validate() error {
	if c.GracePeriod < 0 || c.CriticalPodsGracePeriod < 0 {
		return fmt.Errorf("agent: Config.Shutdown: negative grace period (%v, critical %v)", c.GracePeriod, c.CriticalPodsGracePeriod)
	}
	if c.CriticalPodsGracePeriod > c.GracePeriod {
		return fmt.Errorf("agent: Config.Shutdown.CriticalPodsGracePeriod %v is longer than GracePeriod %v", c.CriticalPodsGracePeriod, c.GracePeriod)
	}
	for i, g := range c.ByPodPriority {
		if g.GracePeriodSeconds < 0 {
			return fmt.Errorf("agent: Config.Shutdown.ByPodPriority[%d] (priority %d): negative GracePeriodSeconds %d", i, g.Priority, g.GracePeriodSeconds)
		}
	}
	return nil
}

// groups returns the groups, lowest priority first.
func (c ShutdownConfig) groups() []ShutdownPriority {
	gs := append([]ShutdownPriority(nil), c.ByPodPriority...)
	if len(gs) == 0 {
		if c.GracePeriod == 0 {
			return nil
		}
		gs = []ShutdownPriority{
			{Priority: 0, GracePeriodSeconds: int64((c.GracePeriod - c.CriticalPodsGracePeriod) / time.Second)},
			{Priority: shutdownCriticalPriority, GracePeriodSeconds: int64(c.CriticalPodsGracePeriod / time.Second)},
		}
	}
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].Priority < gs[j].Priority })
	return gs
}

// groupOf returns the index of the pod's group in gs (sorted, not empty).
func groupOf(gs []ShutdownPriority, pod *v1.Pod) int {
	var p int32
	if pod.Spec.Priority != nil {
		p = *pod.Spec.Priority
	}
	// The first group above the pod's priority; the pod's is the one
	// before it, or the lowest.
	i := sort.Search(len(gs), func(i int) bool { return gs[i].Priority > p })
	if i == 0 {
		return 0
	}
	return i - 1
}

// Shutdown terminates every pod as the kubelet's node shutdown manager
// does, by Config.Shutdown: group after group, lowest priority first,
// each pod killed through its worker with its grace period capped to
// its group's, and recorded Failed with reason Terminated, the message
// "Pod was terminated in response to imminent node shutdown." and a
// DisruptionTarget condition (reason TerminationByKubelet). It waits for
// each group's pods to stop, or for the group's grace period on the
// clock, before the next. From its call on, NodeHealth reports
// ErrShuttingDown and new pods are refused (reason NodeShutdown).
//
// Run must be running, or nothing is killed. Shutdown blocks until the
// last group is done and returns nil, or returns ctx's error when ctx
// ends first; it returns an error at once when Config.Shutdown sets no
// grace period. Safe for concurrent use; calling it again kills what is
// left.
func (a *Agent) Shutdown(ctx context.Context) error {
	a.shuttingDown.Store(true)
	gs := a.cfg.Shutdown.groups()
	if len(gs) == 0 {
		return errors.New("agent: Shutdown: Config.Shutdown sets no grace period")
	}
	a.log.Info("node shutting down: terminating pods", "groups", len(gs))
	byGroup := make([][]*v1.Pod, len(gs))
	for _, p := range a.activePods() {
		i := groupOf(gs, p)
		byGroup[i] = append(byGroup[i], p)
	}
	for i, g := range gs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(byGroup[i]) == 0 {
			continue
		}
		if err := a.shutdownGroup(ctx, g, byGroup[i]); err != nil {
			return err
		}
	}
	a.log.Info("node shutdown: pods terminated")
	return nil
}

// shutdownGroup kills the group's pods and waits until they stopped or
// the group's grace period has passed.
func (a *Agent) shutdownGroup(ctx context.Context, g ShutdownPriority, pods []*v1.Pod) error {
	timer := a.cfg.Clock.NewTimer(time.Duration(g.GracePeriodSeconds) * time.Second)
	defer timer.Stop()
	waits := make([]chan struct{}, 0, len(pods))
	for _, pod := range pods {
		grace := g.GracePeriodSeconds
		if t := pod.Spec.TerminationGracePeriodSeconds; t != nil && *t < grace {
			grace = *t
		}
		a.log.V(1).Info("node shutdown: killing pod", "pod", podutil.FullName(pod), "podUID", pod.UID, "gracePeriod", grace, "priority", g.Priority)
		waits = append(waits, a.awaitStopped(pod.UID))
		a.mu.Lock()
		a.failed[pod.UID] = failure{Reason: status.Reason{Reason: ShutdownReason, Message: ShutdownMessage}, disruption: ShutdownMessage}
		a.mu.Unlock()
		a.workers.UpdatePod(podworkers.UpdatePodOptions{
			UpdateType: podworkers.SyncPodKill, Pod: pod,
			Kill: &podworkers.KillPodOptions{GracePeriodOverride: &grace},
		})
		// A worker that had already stopped the pod will not again.
		if st, ok := a.workers.PodState(pod.UID); !ok || st == podworkers.Terminated {
			a.stopped(pod.UID)
		}
	}
	for _, w := range waits {
		select {
		case <-w:
		case <-timer.C():
			a.log.Info("node shutdown: pods still stopping after the group's grace period", "priority", g.Priority, "gracePeriod", g.GracePeriodSeconds)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// awaitStopped returns a channel closed once the pod's worker has
// stopped its containers.
func (a *Agent) awaitStopped(uid types.UID) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.stopping[uid]
	if !ok {
		ch = make(chan struct{})
		a.stopping[uid] = ch
	}
	return ch
}

// stopped wakes those waiting for the pod to stop.
func (a *Agent) stopped(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.stopping[uid]; ok {
		close(ch)
		delete(a.stopping, uid)
	}
}

// ShuttingDown reports whether Shutdown was called. It does not block;
// safe for concurrent use.
func (a *Agent) ShuttingDown() bool { return a.shuttingDown.Load() }

// NodeHealth is Healthy, with ErrShuttingDown ("node is shutting down")
// once Shutdown was called: give it to kube.NodeConfig.Health, so that
// the node reports NotReady while it shuts down, as the kubelet's does.
// It does not block; safe for concurrent use.
func (a *Agent) NodeHealth() error {
	var down error
	if a.ShuttingDown() {
		down = ErrShuttingDown
	}
	return errors.Join(down, a.Healthy())
}

// disruptionTarget sets the DisruptionTarget condition of a pod the node
// terminates (shutdown, eviction, preemption), with the message, keeping
// the transition time of prev's (nil: none).
func disruptionTarget(s, prev *v1.PodStatus, message string, now time.Time) {
	c := v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now),
		Reason: v1.PodReasonTerminationByKubelet, Message: message,
	}
	if prev != nil {
		for _, p := range prev.Conditions {
			if p.Type == v1.DisruptionTarget && p.Status == v1.ConditionTrue {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	for i := range s.Conditions {
		if s.Conditions[i].Type == v1.DisruptionTarget {
			s.Conditions[i] = c
			return
		}
	}
	s.Conditions = append(s.Conditions, c)
}
