// Package podutil holds pod helpers that several nodekit packages share
// and no library exports (k8s.io/kubernetes has them, but it is not a
// dependency of nodekit).
package podutil

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// QOSClass computes a pod's QoS class as the API server does:
// BestEffort without any CPU or memory request or limit, Guaranteed when
// every container (init containers included) has CPU and memory limits
// equal to its requests (or no requests), Burstable otherwise. A pod that
// sets pod-level resources (spec.resources, the PodLevelResources
// feature, on by default) is classed by them alone, by the same rule. A
// class already in the pod's status wins.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	var set, guaranteed bool
	if pod.Spec.Resources != nil {
		set, guaranteed = classify(pod.Spec.Resources)
	} else {
		guaranteed = true
		for _, list := range [2][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range list {
				s, g := classify(&list[i].Resources)
				set, guaranteed = set || s, guaranteed && g
			}
		}
	}
	switch {
	case !set:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// classify reports whether one set of requirements sets a CPU or memory
// request or limit, and whether it limits both to what it requests (a
// missing request is defaulted to the limit).
func classify(res *v1.ResourceRequirements) (set, guaranteed bool) {
	guaranteed = true
	for _, r := range [2]v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		req, hasReq := res.Requests[r]
		lim, hasLim := res.Limits[r]
		if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
			set = true
		}
		if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
			guaranteed = false
		}
	}
	return set, guaranteed
}

// IsRestartableInit reports whether an init container is a sidecar: an
// init container with restartPolicy Always.
func IsRestartableInit(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// IsStatic reports whether a pod came from a source other than the API
// server (a manifest file or URL): its kubernetes.io/config.source
// annotation is set to something other than "api", as the kubelet
// decides.
func IsStatic(pod *v1.Pod) bool {
	src, ok := pod.Annotations["kubernetes.io/config.source"]
	return ok && src != "api"
}

// FullName is "namespace/name".
func FullName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// ResolvePort turns a port number, or the name of one of the container's
// ports, into a port number, as probes and lifecycle hooks need.
func ResolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal < 1 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n < 65536 {
		return n, nil
	}
	return 0, fmt.Errorf("container %q has no port named %q", c.Name, p.StrVal)
}

// SystemCriticalPriority is the priority from which a pod is critical
// (the priority of system-cluster-critical).
const SystemCriticalPriority int32 = 2000000000

// IsCritical reports whether a pod is critical to the node, as the
// kubelet decides: a static or mirror pod, or one whose priority is at
// least SystemCriticalPriority. The kubelet admits critical pods under
// pressure and never evicts them.
func IsCritical(pod *v1.Pod) bool {
	if IsStatic(pod) {
		return true
	}
	if _, ok := pod.Annotations["kubernetes.io/config.mirror"]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

// UIDProblem says what makes a pod UID unfit to name files and cgroups
// ("" for none): empty, longer than 128 bytes, "." or "..", or a
// character other than a letter, a digit, '-', '_' or '.'.
func UIDProblem(uid types.UID) string {
	s := string(uid)
	switch {
	case s == "":
		return "empty"
	case len(s) > 128:
		return "longer than 128 bytes"
	case s == "." || s == "..":
		return "must not be '.' or '..'"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return "must consist of letters, digits, '-', '_' and '.'"
		}
	}
	return ""
}

// IsTerminal reports whether phase is Succeeded or Failed, the phases a
// pod never leaves.
func IsTerminal(phase v1.PodPhase) bool { return phase == v1.PodSucceeded || phase == v1.PodFailed }
