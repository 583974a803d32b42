package agent

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/status"
)

// The kubelet's reason and message for a pod past its
// activeDeadlineSeconds.
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// activeDeadline returns when the pod will have been active on the node
// for its activeDeadlineSeconds, counted from the start time of its
// latest status (else the one the pod carries), as the kubelet's
// active-deadline handler counts it; false for a pod without a deadline,
// or without a start time, which has not started its deadline.
func (a *Agent) activeDeadline(pod *v1.Pod) (time.Time, bool) {
	d := pod.Spec.ActiveDeadlineSeconds
	if d == nil {
		return time.Time{}, false
	}
	start := a.status.StartTime(pod.UID)
	if start == nil {
		start = pod.Status.StartTime
	}
	if start.IsZero() {
		return time.Time{}, false
	}
	return start.Add(time.Duration(*d) * time.Second), true
}

// pastActiveDeadline reports whether the pod has been active on the node
// for its activeDeadlineSeconds or longer.
func (a *Agent) pastActiveDeadline(pod *v1.Pod) bool {
	end, ok := a.activeDeadline(pod)
	return ok && !a.cfg.Clock.Now().Before(end)
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

// syncAtActiveDeadline asks the pod's worker to be due when the pod's
// active deadline ends, so that the sync loop syncs it then and the sync
// fails it, as the kubelet's sync handlers find such a pod each second;
// a pod without a deadline (or whose deadline an update removed)
// withdraws its request. It runs on every sync of a running pod: the
// start time is known from the pod's first status on, and an update that
// changes the deadline syncs the pod.
func (a *Agent) syncAtActiveDeadline(pod *v1.Pod) {
	end, _ := a.activeDeadline(pod)
	a.workers.SyncBy(pod.UID, end)
}
