// Package podutil holds pod helpers that several nodekit packages share
// and no library exports (k8s.io/kubernetes has them, but it is not a
// dependency of nodekit).
package podutil

import (
	v1 "k8s.io/api/core/v1"
)

// QOSClass computes a pod's QoS class as the API server does:
// BestEffort without any CPU or memory request or limit, Guaranteed when
// every container (init containers included) has CPU and memory limits
// equal to its requests (or no requests), Burstable otherwise. A class
// already in the pod's status wins.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	set, guaranteed := false, true
	all := append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
				set = true
			}
			if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
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

// IsRestartableInit reports whether an init container is a sidecar: an
// init container with restartPolicy Always.
func IsRestartableInit(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// FullName is "namespace/name".
func FullName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
