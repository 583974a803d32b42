package agent

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/status"
)

// newAdmission builds the admission chain: the kubelet's handlers, the
// pressure check fed by pressure, critical pods preempting others, then
// Config.AdmitHandlers.
func newAdmission(cfg *Config, pressure admission.PressureFunc) (admission.Chain, error) {
	chain, err := admission.Defaults(admission.Options{Pressure: pressure, AllowedUnsafeSysctls: cfg.AllowedUnsafeSysctls, Preemption: true})
	if err != nil {
		return nil, fmt.Errorf("agent: Config.AllowedUnsafeSysctls: %w", err)
	}
	return append(chain, cfg.AdmitHandlers...), nil
}

// node is the node as admission sees it, from the Config.
func (a *Agent) node() *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Labels: map[string]string{v1.LabelHostname: a.cfg.NodeName}}}
	for k, v := range a.cfg.NodeLabels {
		n.Labels[k] = v
	}
	n.Spec.Taints = a.cfg.NodeTaints
	n.Status.Allocatable = a.cfg.Allocatable
	return n
}

// addPods remembers the pods, admits those that are neither terminal nor
// being terminated, in order of creation, each against the pods admitted
// before it, and hands every one to its worker: a rejected pod's worker
// finds it Failed and finishes it without starting anything or changing
// its status.
func (a *Agent) addPods(pods []*v1.Pod) {
	pods = append([]*v1.Pod(nil), pods...)
	sort.SliceStable(pods, func(i, j int) bool {
		return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp)
	})
	node := a.node()
	// The active pods are listed once per batch, without the batch's own
	// pods, and each pod of the batch that holds resources joins them
	// after its turn: a batch of n pods costs one listing, not n.
	batch := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		batch[p.UID] = true
	}
	var others []*v1.Pod
	for _, p := range a.activePods() {
		if !batch[p.UID] {
			others = append(others, a.allocatedPod(p))
		}
	}
	for _, p := range pods {
		a.remember([]*v1.Pod{p})
		switch {
		case a.workers.IsPodTerminationRequested(p.UID):
			others = append(others, p) // it holds resources until it is gone
		case !podutil.IsTerminal(p.Status.Phase) && a.ShuttingDown():
			a.reject(p, ShutdownRejectReason, ShutdownRejectMessage)
		case !podutil.IsTerminal(p.Status.Phase):
			// Admitted with what an earlier run allocated to it, if any:
			// a resize its spec asks for is decided on after.
			admitted := a.restoredPod(p)
			res := a.admit.Admit(admission.Attributes{Pod: admitted, OtherPods: others, Node: node})
			switch {
			case !res.Admit:
				a.reject(p, res.Reason, res.Message)
			case res.Preemption != nil:
				a.preempt(p, res.Preemption)
				others = append(without(others, res.Preemption.Pods), admitted)
			default:
				others = append(others, admitted)
			}
			if res.Admit && a.allocate(p) {
				// A resize its spec asks for beyond what an earlier run
				// allocated, decided on before its first sync.
				a.handleResizes([]*v1.Pod{p})
			}
		}
		a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	}
	a.saveAllocations() // once per batch
}

// activePods are the desired pods that hold resources: not known to be
// terminated, not rejected, and neither evicted nor terminal unless
// still being terminated.
func (a *Agent) activePods() []*v1.Pod {
	type candidate struct {
		pod    *v1.Pod
		failed bool // evicted or otherwise failed by the agent
	}
	a.mu.Lock()
	cands := make([]candidate, 0, len(a.pods))
	for uid, p := range a.pods {
		if f, ok := a.failed[uid]; !f.rejected {
			cands = append(cands, candidate{p, ok})
		}
	}
	a.mu.Unlock()
	out := make([]*v1.Pod, 0, len(cands))
	for _, c := range cands {
		uid := c.pod.UID
		if c.failed && !a.workers.IsPodTerminationRequested(uid) {
			continue
		}
		if st, ok := a.workers.PodState(uid); ok && st == podworkers.Terminated {
			continue
		}
		// Finished as its status says, or as its source does (a restarted
		// agent's Succeeded Job pods), as the kubelet's isAdmittedPodTerminal.
		s, ok := a.status.GetPodStatus(uid)
		if (ok && podutil.IsTerminal(s.Phase) || podutil.IsTerminal(c.pod.Status.Phase)) && !a.workers.IsPodTerminationRequested(uid) {
			continue
		}
		out = append(out, c.pod)
	}
	return out
}

// reject records a pod the node refused as Failed with the reason, as
// the kubelet's rejectPod does, with a warning event.
func (a *Agent) reject(pod *v1.Pod, reason, message string) {
	a.log.V(2).Info("pod rejected", "pod", podutil.FullName(pod), "podUID", pod.UID, "reason", reason, "message", message)
	a.cfg.Events(pod, v1.EventTypeWarning, reason, message)
	a.metrics.rejections.WithLabelValues(rejectionLabel(reason)).Inc()
	r := status.Reason{Reason: reason, Message: "Pod was rejected: " + message}
	a.mu.Lock()
	a.failed[pod.UID] = failure{Reason: r, rejected: true}
	a.mu.Unlock()
	a.status.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodFailed, Reason: r.Reason, Message: r.Message, QOSClass: podutil.QOSClass(pod)})
}

// preempt stops the pods a critical pod is admitted in place of, as the
// kubelet's critical pod admission handler does: each gets a warning
// event Preempting, is recorded Failed with reason Preempting, the
// kubelet's message and a DisruptionTarget condition, and is killed by
// its worker within its own grace period, counted in
// kubelet_preemptions. It does not wait for the kills: the critical pod
// starts while they stop.
func (a *Agent) preempt(critical *v1.Pod, p *admission.Preemption) {
	for _, victim := range p.Pods {
		a.log.V(2).Info("preempting pod to free resources", "pod", podutil.FullName(victim), "podUID", victim.UID,
			"requestingPod", podutil.FullName(critical), "resource", p.Resource)
		a.cfg.Events(victim, v1.EventTypeWarning, admission.ReasonPreempting, admission.PreemptionMessage)
		a.mu.Lock()
		a.failed[victim.UID] = failure{
			Reason:     status.Reason{Reason: admission.ReasonPreempting, Message: admission.PreemptionMessage},
			disruption: admission.PreemptionDisruptionMessage,
		}
		a.mu.Unlock()
		a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: victim, Kill: &podworkers.KillPodOptions{}})
		a.metrics.preemptions.WithLabelValues(string(p.Resource)).Inc()
	}
}

// without is pods less those in drop, by UID.
func without(pods, drop []*v1.Pod) []*v1.Pod {
	gone := make(map[types.UID]bool, len(drop))
	for _, p := range drop {
		gone[p.UID] = true
	}
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		if !gone[p.UID] {
			out = append(out, p)
		}
	}
	return out
}

// failedBy returns the reason the agent failed the pod for (rejected or
// evicted), if it did.
func (a *Agent) failedBy(uid types.UID) (status.Reason, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, ok := a.failed[uid]
	return f.Reason, ok
}

// failure returns why the agent failed the pod, if it did.
func (a *Agent) failure(uid types.UID) (failure, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, ok := a.failed[uid]
	return f, ok
}

// failure is why the agent failed a pod: rejected at admission (it never
// ran, so it never holds resources), evicted, preempted, or terminated by
// a node shutdown.
type failure struct {
	status.Reason
	rejected bool
	// disruption, when set, is the message of the DisruptionTarget
	// condition the pod's status gets (reason TerminationByKubelet).
	disruption string
}

// rejectionLabel bounds the reason label of
// kubelet_admission_rejections_total as the kubelet does: its known
// reasons as they are, other resource shortages as
// OutOfExtendedResources, anything else as Other.
func rejectionLabel(reason string) string {
	switch reason {
	case admission.ReasonOSSelectorMismatch, admission.ReasonOSNotSupported,
		admission.ReasonOutOfCPU, admission.ReasonOutOfMemory, admission.ReasonOutOfEphemeralStorage, admission.ReasonOutOfPods,
		admission.ReasonEvicted, admission.ReasonSysctlForbidden, admission.ReasonUnexpectedAdmissionError:
		return reason
	}
	if strings.HasPrefix(reason, admission.ReasonPrefixOutOf) {
		return "OutOfExtendedResources"
	}
	return "Other"
}
