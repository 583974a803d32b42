package agent

import (
	"encoding/json"
	"strconv"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// The events of an in-place resize, the kubelet's.
const (
	ReasonResizeStarted    = "ResizeStarted"
	ReasonResizeCompleted  = "ResizeCompleted"
	ReasonResizeError      = "ResizeError"
	ReasonResizeDeferred   = "ResizeDeferred"
	ReasonResizeInfeasible = "ResizeInfeasible"
)

// allocation is what a pod was given: the requests and limits of its
// containers (init containers included) and its spec.resources, when it
// was admitted or when a resize of it was accepted. The pod runs with
// these; its spec may ask for others, which a resize then decides on.
type allocation struct {
	containers map[string]v1.ResourceRequirements
	pod        *v1.ResourceRequirements
}

// resizeState is a pod's allocation and where its resize stands.
type resizeState struct {
	alloc allocation
	// pending is why a resize waits (Deferred, Infeasible); nil: none.
	pending *status.Reason
	// inProgress: an accepted resize not yet carried out; its Reason is
	// Error once carrying it out failed.
	inProgress *status.Reason
	// seq counts the accepted resizes: a sync ends one only if it ran
	// with its allocation. generation is the pod's when it was accepted.
	seq        int
	generation int64
	// pendingGeneration is the pod's when pending was set.
	pendingGeneration int64
}

// qosChanges reports whether the pod's QoS class, computed from its spec,
// differs between the allocated and the desired spec.
func qosChanges(allocated, desired *v1.Pod) bool {
	a, d := *allocated, *desired
	a.Status, d.Status = v1.PodStatus{}, v1.PodStatus{}
	return podutil.QOSClass(&a) != podutil.QOSClass(&d)
}

func allocationOf(pod *v1.Pod) allocation {
	a := allocation{containers: make(map[string]v1.ResourceRequirements, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			a.containers[list[i].Name] = *list[i].Resources.DeepCopy()
		}
	}
	a.pod = pod.Spec.Resources.DeepCopy()
	return a
}

// matches reports whether the pod's spec asks for what it was given.
func (al allocation) matches(pod *v1.Pod) bool {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			r, ok := al.containers[list[i].Name]
			if ok && !apiequality.Semantic.DeepEqual(r, list[i].Resources) {
				return false
			}
		}
	}
	return apiequality.Semantic.DeepEqual(al.pod, pod.Spec.Resources)
}

// apply returns the pod with its allocated resources, a copy when they
// differ from its spec.
func (al allocation) apply(pod *v1.Pod) *v1.Pod {
	if al.matches(pod) {
		return pod
	}
	p := pod.DeepCopy()
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if r, ok := al.containers[list[i].Name]; ok {
				list[i].Resources = *r.DeepCopy()
			}
		}
	}
	p.Spec.Resources = al.pod.DeepCopy()
	return p
}

// allocate records the pod's resources as allocated, at its admission:
// those an earlier run allocated to it (Config.AllocationCheckpoint), else
// its spec's. It reports whether the pod's spec asks for other resources
// than it was so given: a resize to decide on.
func (a *Agent) allocate(pod *v1.Pod) (resize bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.resizes[pod.UID]
	if !ok {
		al, restored := a.restored[pod.UID]
		if restored {
			delete(a.restored, pod.UID)
		} else {
			al = allocationOf(pod)
		}
		st = &resizeState{alloc: al}
		a.resizes[pod.UID] = st
		a.allocationsChanged()
	}
	return !st.alloc.matches(pod)
}

// restoredPod is the pod with the resources an earlier run allocated to
// it, if it did: what the pod is admitted with.
func (a *Agent) restoredPod(pod *v1.Pod) *v1.Pod {
	a.mu.Lock()
	al, ok := a.restored[pod.UID]
	a.mu.Unlock()
	if !ok {
		return pod
	}
	return al.apply(pod)
}

// allocatedPod is the pod as it was allocated: the pod itself unless a
// resize of it waits.
func (a *Agent) allocatedPod(pod *v1.Pod) *v1.Pod {
	p, _ := a.allocatedPodSeq(pod)
	return p
}

// allocatedPodSeq is allocatedPod with the count of the pod's accepted
// resizes it reflects.
func (a *Agent) allocatedPodSeq(pod *v1.Pod) (*v1.Pod, int) {
	a.mu.Lock()
	st := a.resizes[pod.UID]
	var al allocation
	seq := 0
	if st != nil {
		al, seq = st.alloc, st.seq
	}
	a.mu.Unlock()
	if st == nil {
		return pod, 0
	}
	return al.apply(pod), seq
}

// resizeConditions are the pod's PodResizePending and
// PodResizeInProgress, if any, and the pod's generation when its last
// resize was accepted.
func (a *Agent) resizeConditions(uid types.UID) (pending, inProgress *status.Reason, accepted int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := a.resizes[uid]; st != nil {
		return st.pending, st.inProgress, st.generation
	}
	return nil, nil, 0
}

// handleResizes decides on the resizes the pods ask for, as the kubelet's
// allocation manager does: a pod whose spec asks for other resources
// than it was given gets them if they fit the node beside the other pods'
// allocations (PodResizeInProgress, event ResizeStarted, and a sync that
// carries the resize out), and waits otherwise (PodResizePending, reason
// Deferred, retried at each housekeeping and as pods go); a spec back to
// its allocation drops the wait. It returns the pods whose allocation or
// conditions changed.
func (a *Agent) handleResizes(pods []*v1.Pod) []*v1.Pod {
	var changed []*v1.Pod
	var others []*v1.Pod
	accepted := false
	listed := false
	node := a.node()
	for _, p := range pods {
		a.mu.Lock()
		st := a.resizes[p.UID]
		a.mu.Unlock()
		if st == nil || podutil.IsTerminal(p.Status.Phase) || a.workers.IsPodTerminationRequested(p.UID) {
			continue
		}
		if st.alloc.matches(p) {
			a.mu.Lock()
			was := st.pending
			st.pending = nil
			a.mu.Unlock()
			if was != nil {
				changed = append(changed, p)
			}
			continue
		}
		if !listed {
			for _, o := range a.activePods() {
				others = append(others, a.allocatedPod(o))
			}
			listed = true
		}
		var r *status.Reason
		event, eventReason := ReasonResizeDeferred, ""
		if qosChanges(st.alloc.apply(p), p) {
			// The API refuses it; another source may not.
			r = &status.Reason{Reason: v1.PodReasonInfeasible, Message: "Pod QOS Class may not change as a result of resizing"}
			event, eventReason = ReasonResizeInfeasible, v1.PodReasonInfeasible
		} else if res := admission.Resources(admission.Attributes{Pod: p, OtherPods: without(others, []*v1.Pod{p}), Node: node}); !res.Admit {
			r = &status.Reason{Reason: v1.PodReasonDeferred, Message: res.Message}
			eventReason = res.Reason
		}
		if r != nil {
			a.mu.Lock()
			was, wasGen := st.pending, st.pendingGeneration
			st.pending, st.pendingGeneration = r, p.Generation
			a.mu.Unlock()
			if was == nil || *was != *r {
				changed = append(changed, p)
			}
			// As the kubelet: one event per reason and generation.
			if was == nil || was.Reason != r.Reason || wasGen != p.Generation {
				a.cfg.Events(p, v1.EventTypeWarning, event, "Pod resize "+eventReason+": "+resizeEventJSON(p, p.Generation, r.Message))
			}
			continue
		}
		a.mu.Lock()
		st.alloc = allocationOf(p)
		a.allocationsChanged()
		st.pending = nil
		st.inProgress = &status.Reason{}
		st.seq++
		st.generation = p.Generation
		a.mu.Unlock()
		for i, o := range others {
			if o.UID == p.UID {
				others[i] = p
			}
		}
		a.log.V(2).Info("pod resize accepted", "pod", podutil.FullName(p), "podUID", p.UID, "generation", p.Generation)
		a.cfg.Events(p, v1.EventTypeNormal, ReasonResizeStarted, "Pod resize started: "+resizeEventJSON(p, p.Generation, ""))
		changed = append(changed, p)
		accepted = true
	}
	if accepted {
		a.saveAllocations() // kept before the syncs that carry them out
	}
	return changed
}

// retryResizes decides again on the deferred resizes, at housekeeping and
// as pods go, and syncs the pods whose resize was accepted. An
// infeasible one waits for another spec. It reports whether any was
// deferred.
func (a *Agent) retryResizes() (waiting bool) {
	a.mu.Lock()
	var deferred []*v1.Pod
	for uid, st := range a.resizes {
		if st.pending != nil && st.pending.Reason == v1.PodReasonDeferred {
			if p := a.pods[uid]; p != nil {
				deferred = append(deferred, p)
			}
		}
	}
	a.mu.Unlock()
	if len(deferred) == 0 {
		return false
	}
	for _, p := range a.handleResizes(deferred) {
		a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
	}
	return true
}

// resizeSynced records how a sync, which ran with the allocation of the
// pod's seq-th accepted resize, carried it out: a failed resize step
// keeps PodResizeInProgress with reason Error and its message (event
// ResizeError); otherwise it ends (event ResizeCompleted) once the
// observation obs shows every running container with its new resources
// (runtime.ResizeChecker; a container restarted to resize it shows in a
// later observation, whose sync ends it), or at once with a runtime that
// cannot tell. A sync that ran with an older allocation changes nothing:
// another one follows. It reports whether the conditions changed.
func (a *Agent) resizeSynced(pod *v1.Pod, seq int, res *runtime.SyncResult, obs *runtime.PodStatus) bool {
	var failed *runtime.SyncStep
	for i := range res.Steps {
		if s := &res.Steps[i]; s.Action == runtime.ActionResize && s.Err != nil {
			failed = s
		}
	}
	a.mu.Lock()
	st := a.resizes[pod.UID]
	if st == nil || st.seq != seq || (st.inProgress == nil && failed == nil) {
		a.mu.Unlock()
		return false
	}
	gen := st.generation
	was := st.inProgress
	a.mu.Unlock()
	var now *status.Reason
	switch c, ok := a.rt.(runtime.ResizeChecker); {
	case failed != nil:
		now = &status.Reason{Reason: v1.PodReasonError, Message: failed.Message}
	case ok && obs != nil && c.ResizeInProgress(pod, obs):
		return false // carried out in a later sync
	}
	a.mu.Lock()
	if st.seq != seq {
		a.mu.Unlock()
		return false // a newer resize was accepted meanwhile
	}
	st.inProgress = now
	a.mu.Unlock()
	switch {
	case now == nil:
		a.cfg.Events(pod, v1.EventTypeNormal, ReasonResizeCompleted, "Pod resize completed: "+resizeEventJSON(pod, gen, ""))
		return true
	case was == nil || *was != *now:
		a.cfg.Events(pod, v1.EventTypeWarning, ReasonResizeError, "Pod resize error: "+resizeEventJSON(pod, gen, now.Message))
		return true
	}
	return false
}

// resizeEventJSON is the body of a resize event, the kubelet's: the
// containers' resources, the pod's generation and an error, if any.
func resizeEventJSON(pod *v1.Pod, generation int64, errMsg string) string {
	type ctr struct {
		Name      string                  `json:"name"`
		Resources v1.ResourceRequirements `json:"resources"`
	}
	body := struct {
		InitContainers []ctr  `json:"initContainers,omitempty"`
		Containers     []ctr  `json:"containers,omitempty"`
		Generation     int64  `json:"generation"`
		Error          string `json:"error,omitempty"`
	}{Generation: generation, Error: errMsg}
	for _, c := range pod.Spec.InitContainers {
		body.InitContainers = append(body.InitContainers, ctr{c.Name, c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		body.Containers = append(body.Containers, ctr{c.Name, c.Resources})
	}
	out, err := json.Marshal(body)
	if err != nil {
		return "generation " + strconv.FormatInt(generation, 10)
	}
	return string(out)
}
