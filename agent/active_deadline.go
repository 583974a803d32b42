package agent

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/status"
)

// The kubelet's reason and message for a pod past its
// activeDeadlineSeconds.
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// pastActiveDeadline reports whether the pod has been active on the node
// for its activeDeadlineSeconds or longer, counted from the start time of
// its latest status (else the one the pod carries), as the kubelet's
// active-deadline handler counts it. A pod without a start time has not
// started its deadline.
func (a *Agent) pastActiveDeadline(pod *v1.Pod) bool {
	d := pod.Spec.ActiveDeadlineSeconds
	if d == nil {
		return false
	}
	start := a.status.StartTime(pod.UID)
	if start == nil {
		start = pod.Status.StartTime
	}
	if start.IsZero() {
		return false
	}
	return a.cfg.Clock.Since(start.Time) >= time.Duration(*d)*time.Second
}

// enforceActiveDeadline records a pod past its active deadline as Failed
// with reason DeadlineExceeded, and a DeadlineExceeded event, as the
// kubelet's handler does when the pod syncs; the status generated next
// is then terminal, and the pod's worker kills it. A pod the agent has
// already failed keeps its first reason.
func (a *Agent) enforceActiveDeadline(pod *v1.Pod) {
	if !a.pastActiveDeadline(pod) {
		return
	}
	a.mu.Lock()
	_, failed := a.failed[pod.UID]
	if !failed {
		a.failed[pod.UID] = failure{Reason: status.Reason{Reason: ReasonDeadlineExceeded, Message: MessageDeadlineExceeded}}
	}
	a.mu.Unlock()
	if failed {
		return
	}
	a.log.V(2).Info("pod past its active deadline", "pod", podutil.FullName(pod), "podUID", pod.UID, "activeDeadlineSeconds", *pod.Spec.ActiveDeadlineSeconds)
	a.cfg.Events(pod, v1.EventTypeNormal, ReasonDeadlineExceeded, MessageDeadlineExceeded)
}

// due is the sync loop's list of pods to sync each second: those whose
// worker's resync is due, and those that have just passed their active
// deadline, as the kubelet's sync handlers ask. Only pods with a
// deadline are looked at, so it costs nothing on a node without them.
func (a *Agent) due(now time.Time) []types.UID {
	out := a.workers.Due(now)
	a.mu.Lock()
	var candidates []*v1.Pod
	for uid := range a.deadlines {
		if _, failed := a.failed[uid]; !failed {
			candidates = append(candidates, a.pods[uid])
		}
	}
	a.mu.Unlock()
	for _, p := range candidates {
		if a.pastActiveDeadline(p) && !a.workers.IsPodTerminationRequested(p.UID) && !slices.Contains(out, p.UID) {
			out = append(out, p.UID)
		}
	}
	return out
}
