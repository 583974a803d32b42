package podutil

import v1 "k8s.io/api/core/v1"

// ContainerShouldRestart reports whether a container that exited with
// exitCode is started again, by the kubelet's rules when the
// ContainerRestartRules feature is on (the default since Kubernetes
// 1.35):
//
//  1. when the container sets its own restartPolicy, its
//     restartPolicyRules are tried in order and the first that matches
//     the exit code decides: action Restart restarts it, and so does
//     action RestartAllContainers (the RestartAllContainersOnContainerExits
//     feature, on by default since Kubernetes 1.37), which restarts the
//     other containers of the pod too (RestartsAllContainers);
//  2. otherwise the container's restartPolicy decides (Always: yes,
//     OnFailure: only after a non-zero exit code, Never: no);
//  3. a container without a restartPolicy follows the pod's, the same
//     way (an empty one counts as Always).
//
// A sidecar (restartPolicy Always) always restarts. The caller decides
// what a container that did not exit (created, unknown, never run) does.
func ContainerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if r, ok := MatchingRestartRule(c, exitCode); ok {
			switch r.Action {
			case v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers:
				return true
			}
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// MatchingRestartRule returns the first of a container's
// restartPolicyRules that matches exitCode: operator In when the code is
// among the values, NotIn when it is not. A rule without exitCodes or with
// another operator never matches.
func MatchingRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, r := range c.RestartPolicyRules {
		if r.ExitCodes == nil {
			continue
		}
		in := false
		for _, v := range r.ExitCodes.Values {
			if v == exitCode {
				in = true
				break
			}
		}
		switch r.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return r, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return r, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// RestartsOnProbeFailure reports whether a running container killed for
// a failed liveness or startup probe (or one in the unknown state, which
// has no exit code) is started again: the container's own restartPolicy
// when it sets one (anything but Never restarts), else the pod's
// (anything but Never). Restart rules are not looked at: there is no
// exit code to match, as with the kubelet.
func RestartsOnProbeFailure(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

// RestartsAllContainers reports whether a container that exited with
// exitCode restarts every container of its pod: the first of its
// restartPolicyRules that matches the code has the action
// RestartAllContainers.
func RestartsAllContainers(c *v1.Container, exitCode int32) bool {
	r, ok := MatchingRestartRule(c, exitCode)
	return ok && r.Action == v1.ContainerRestartRuleActionRestartAllContainers
}

// MayRestartAllContainers reports whether any init or regular container
// of the pod has a restart rule with the action RestartAllContainers, the
// kubelet's AllContainersCouldRestart: such a pod reports the
// AllContainersRestarting condition, and any of its containers may leave
// the terminated state.
func MayRestartAllContainers(spec *v1.PodSpec) bool {
	for _, list := range [2][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			for _, r := range list[i].RestartPolicyRules {
				if r.Action == v1.ContainerRestartRuleActionRestartAllContainers {
					return true
				}
			}
		}
	}
	return false
}

// RestartingAllContainers reports whether a pod's API status says its
// containers are being restarted all together, the API half of the
// kubelet's ShouldAllContainersRestart: the AllContainersRestarting
// condition is True, or an init or regular container is terminated with
// an exit code that one of its rules with the action RestartAllContainers
// matches (RestartsAllContainers).
func RestartingAllContainers(pod *v1.Pod, s *v1.PodStatus) bool {
	if s == nil {
		return false
	}
	for _, c := range s.Conditions {
		if c.Type == v1.AllContainersRestarting && c.Status == v1.ConditionTrue {
			return true
		}
	}
	for _, pair := range [2]struct {
		specs    []v1.Container
		statuses []v1.ContainerStatus
	}{{pod.Spec.InitContainers, s.InitContainerStatuses}, {pod.Spec.Containers, s.ContainerStatuses}} {
		for i := range pair.statuses {
			t := pair.statuses[i].State.Terminated
			if t == nil {
				continue
			}
			for j := range pair.specs {
				if c := &pair.specs[j]; c.Name == pair.statuses[i].Name && RestartsAllContainers(c, t.ExitCode) {
					return true
				}
			}
		}
	}
	return false
}
