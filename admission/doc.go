// Package admission decides, before a pod is started, whether the node
// can take it, the way the kubelet's admit handlers do: a rejected pod is
// never started; the agent records it Failed with the handler's reason
// and the message "Pod was rejected: <message>", and emits a warning
// event with the reason, as the kubelet's rejectPod does.
//
// A Handler looks at one pod, the pods already admitted and still active
// (Attributes.OtherPods) and the node (labels, taints, allocatable), and
// returns a Result. A Chain runs handlers in order; the first rejection
// wins. Defaults returns the kubelet's chain, in the kubelet's order:
//
//   - Pressure: under memory pressure only, a BestEffort pod that does not
//     tolerate the node.kubernetes.io/memory-pressure taint is refused;
//     under any other pressure (disk, PID) every pod is refused; critical
//     pods (static, mirror, or priority at least 2000000000) always pass.
//     Reason Evicted, message "The node had condition: [MemoryPressure]. ".
//   - Sysctls: a pod's sysctls must be in the safe set or in the allowed
//     unsafe patterns ("net.core.*"), and a namespaced one cannot be used
//     with the host's namespace. Reason SysctlForbidden, message
//     `forbidden sysctl: "kernel.msgmax" not allowlisted`.
//   - OS: a pod labelled kubernetes.io/os, or with spec.os, for another
//     OS (PodOSSelectorNodeLabelDoesNotMatch, PodOSNotSupported).
//   - Resources: the pod's requests (k8s.io/component-helpers/resource:
//     the larger of the regular containers' sum plus sidecars and the
//     largest init step, plus overhead) added to those of the other pods
//     must fit the node's allocatable: the pod count first, then cpu,
//     memory, ephemeral-storage and extended resources. Reasons OutOfpods,
//     OutOfcpu, OutOfmemory, OutOfephemeral-storage, OutOf<name>; message
//     "Node didn't have enough resource: cpu, requested: 2000, used: 500,
//     capacity: 1000" (millicores for cpu, bytes otherwise). With
//     Options.Preemption, Preempting in its place (see below).
//   - NodeAffinity: spec.nodeSelector and required node affinity
//     (k8s.io/component-helpers nodeaffinity) must match the node's labels.
//   - NodeName: spec.nodeName, when set, must be this node.
//   - NodePorts: a host port (protocol, host IP, port; 0.0.0.0 conflicts
//     with every IP) must not be in use by another pod.
//   - TaintToleration: the node's NoExecute taints must be tolerated
//     (the kubelet checks only NoExecute: NoSchedule is the scheduler's),
//     except by static pods.
//
// Predicate failures carry the scheduler plugin's name as the reason and
// "Predicate <name> failed: <why>" as the message, as the kubelet's do.
//
// # Critical pods preempting others
//
// The kubelet never refuses a critical pod (static, mirror, or priority
// at least 2000000000) for resources alone: its critical pod admission
// handler stops other pods to make room. Preempting does the same as a
// Handler (Options.Preemption puts it in Defaults in place of
// Resources). When a critical pod does not fit and the checks that
// preemption cannot help (node affinity, node name, host ports,
// NoExecute taints) pass, it is admitted with a Result.Preemption: the
// pods to stop, chosen by the kubelet's rules from those it may preempt
// (not critical, or of lower priority when both have one). BestEffort
// pods go before Burstable ones and Burstable before Guaranteed, each
// class only as far as the classes above cannot free enough; within a
// class, round after round, the pod whose requests come closest to what
// is still missing (every short resource weighing the same), on a tie
// the one with smaller memory and cpu requests. When no set of pods
// frees enough, the pod is refused with reason UnexpectedAdmissionError
// and the kubelet's message. Pods that are not critical are refused as
// before.
//
// The handler only decides. The caller stops the pods; the agent
// records each Failed with reason Preempting, the message "Preempted in
// order to admit critical pod" and a DisruptionTarget condition ("Pod
// was preempted by Kubelet to accommodate a critical pod."), emits a
// warning event Preempting, counts kubelet_preemptions{preemption_signal}
// and kills it with its own grace period. A Chain that refuses the pod
// in a later handler drops the Preemption, so no pod is stopped for a
// pod that is not admitted.
//
// # Why a package of its own
//
// DESIGN.md lists admission with eviction. It lives apart because most of
// it (resources, affinity, taints, ports, sysctls) has nothing to do with
// eviction: an embedder that never evicts still wants pods that do not
// fit refused, and a custom eviction manager should not have to bring
// its own resource checks. The only link, the pressure check, takes a
// PressureFunc, which the agent fills from the eviction manager; neither
// package imports the other.
//
// # Differences from the kubelet
//
//   - A resource absent from the node's allocatable is not checked (the
//     kubelet reads every resource from cAdvisor; an embedder that tells
//     nodekit nothing about the node gets no resource limit). "pods" is
//     checked only when the allocatable names it.
//   - The kubelet kills the preempted pods before it admits the
//     critical pod, blocking its sync loop until they have stopped; the
//     agent admits the critical pod at once and the pods stop within
//     their grace periods while it starts, so for that long the node's
//     requests may exceed its allocatable.
//   - The kubelet picks the pods to preempt from all its active pods;
//     Preempting picks them from Attributes.OtherPods, which the agent
//     fills with the same.
//   - Device-plugin, topology-manager, AppArmor and pod-feature handlers
//     are not part of the chain; add them as handlers of your own.
//
// # Usage
//
//	chain, err := admission.Defaults(admission.Options{Pressure: mgr.Pressure, Preemption: true})
//	res := chain.Admit(admission.Attributes{Pod: pod, OtherPods: active, Node: node})
//	switch {
//	case !res.Admit:
//		fail(pod, res.Reason, "Pod was rejected: "+res.Message)
//	case res.Preemption != nil:
//		for _, p := range res.Preemption.Pods {
//			stop(p, admission.ReasonPreempting, admission.PreemptionMessage)
//		}
//	}
package admission
