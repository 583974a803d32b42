package podutil

import v1 "k8s.io/api/core/v1"

// ContainerShouldRestart reports whether a container that exited with
// exitCode is started again, by the kubelet's rules when the
// ContainerRestartRules feature is on (the default since Kubernetes
// 1.35):
//
//  1. when the container sets its own restartPolicy, its
//     restartPolicyRules are tried in order and the first that matches
//     the exit code decides: action Restart restarts it;
//  2. otherwise the container's restartPolicy decides (Always: yes,
//     OnFailure: only after a non-zero exit code, Never: no);
//  3. a container without a restartPolicy follows the pod's, the same
//     way (an empty one counts as Always).
//
// A rule with action RestartAllContainers (which nodekit's validation
// refuses) is treated as the kubelet treats it with its
// RestartAllContainersOnContainerExits feature off: as no match, so the
// container's restartPolicy decides.
//
// A sidecar (restartPolicy Always) always restarts. The caller decides
// what a container that did not exit (created, unknown, never run) does.
func ContainerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if r, ok := MatchingRestartRule(c, exitCode); ok && r.Action == v1.ContainerRestartRuleActionRestart {
			return true
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
