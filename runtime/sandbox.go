package runtime

import v1 "k8s.io/api/core/v1"

// SandboxChanged reports whether the pod needs a new sandbox, with the
// kubelet's rules: none exists; more than one is ready; the newest is not
// ready; its network namespace mode does not match spec.hostNetwork; or a
// pod on the pod network has no IP. It also returns the attempt number
// the next sandbox gets and, when no new one is needed, the ID of the
// sandbox to use (when a new one is needed and the newest is not ready,
// that newest one's ID, for the caller to stop).
//
// It is the one rule both the sync decision (runtime/cri) and the pod's
// PodReadyToStartContainers condition (status) use, so they never
// disagree. It is a pure function; status may be empty but not nil.
func SandboxChanged(pod *v1.Pod, status *PodStatus) (changed bool, attempt uint32, sandboxID string) {
	if len(status.SandboxStatuses) == 0 {
		return true, 0, ""
	}
	ready := 0
	for _, s := range status.SandboxStatuses {
		if s.State == SandboxStateReady {
			ready++
		}
	}
	newest := status.SandboxStatuses[0]
	next := newest.Attempt + 1
	switch {
	case ready > 1, newest.State != SandboxStateReady:
		return true, next, newest.ID
	case (newest.NetworkMode == NamespaceModeNode) != pod.Spec.HostNetwork:
		return true, next, ""
	case !pod.Spec.HostNetwork && len(newest.IPs) == 0:
		return true, next, ""
	}
	return false, newest.Attempt, newest.ID
}
