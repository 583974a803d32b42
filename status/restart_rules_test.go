package status_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// withPolicy gives the named container (regular or init) its own
// restartPolicy and restart rules.
func withPolicy(p *v1.Pod, name string, policy v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) *v1.Pod {
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				list[i].RestartPolicy = &policy
				list[i].RestartPolicyRules = rules
			}
		}
	}
	return p
}

func restartOn(codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}
}

// The phase with per-container restart settings, as the kubelet's
// getPhase gives it with the ContainerRestartRules feature on (its cases
// in kubelet_pods_test.go, TestPodPhaseWithContainerRestartPolicy and
// ...InitContainers), and the pods of the NodeConformance specs
// "Container Restart Rules".
func TestPhaseWithContainerRestartPolicy(t *testing.T) {
	always, never := v1.RestartPolicyAlways, v1.RestartPolicyNever
	cAlways, cOnFailure, cNever := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		obs     *runtime.PodStatus
		waiting map[string]status.Reason
		want    v1.PodPhase
	}{
		{"container Never failed in an Always pod", withPolicy(pod(always, nil, "a"), "a", cNever), observed(c("a", exited, 1, 0)), nil, v1.PodFailed},
		{"container OnFailure failed in an Always pod", withPolicy(pod(always, nil, "a"), "a", cOnFailure), observed(c("a", exited, 1, 0)), nil, v1.PodRunning},
		{"container Always failed", withPolicy(pod(always, nil, "a"), "a", cAlways), observed(c("a", exited, 1, 0)), nil, v1.PodRunning},
		{"container Always succeeded in a Never pod, another failed", withPolicy(pod(never, nil, "a", "b"), "a", cAlways), observed(c("a", exited, 0, 0), c("b", exited, 1, 0)), nil, v1.PodRunning},
		{"none restartable: Never failed, OnFailure succeeded", withPolicy(withPolicy(pod(always, nil, "a", "b"), "a", cNever), "b", cOnFailure),
			observed(c("a", exited, 1, 0), c("b", exited, 0, 0)), nil, v1.PodFailed},
		{"all succeeded, none to restart", withPolicy(withPolicy(pod(always, nil, "a", "b"), "a", cNever), "b", cOnFailure),
			observed(c("a", exited, 0, 0), c("b", exited, 0, 0)), nil, v1.PodSucceeded},
		{"rule matched: crash looping, not done", withPolicy(pod(never, nil, "a"), "a", cNever, restartOn(42)),
			observed(c("a", exited, 42, 1)), map[string]status.Reason{"a": {Reason: "CrashLoopBackOff"}}, v1.PodRunning},
		{"rule did not match: failed", withPolicy(pod(never, nil, "a"), "a", cNever, restartOn(42)), observed(c("a", exited, 1, 0)), nil, v1.PodFailed},
		{"init container Never failed in an Always pod", withPolicy(pod(always, []string{"i"}, "a"), "i", cNever), observed(c("i", exited, 1, 0)), nil, v1.PodFailed},
		{"init container OnFailure failed in a Never pod", withPolicy(pod(never, []string{"i"}, "a"), "i", cOnFailure), observed(c("i", exited, 1, 0)), nil, v1.PodPending},
		{"init container rule matched in a Never pod", withPolicy(pod(never, []string{"i"}, "a"), "i", cNever, restartOn(3)),
			observed(c("i", exited, 3, 1)), map[string]status.Reason{"i": {Reason: "CrashLoopBackOff"}}, v1.PodPending},
		{"sidecar failed in a Never pod", withPolicy(pod(never, []string{"i"}, "a"), "i", cAlways), observed(c("i", exited, 1, 0)), nil, v1.PodPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := status.Generate(status.Input{Pod: tc.pod, Runtime: tc.obs, Waiting: tc.waiting, Now: now})
			if got.Phase != tc.want {
				t.Errorf("phase %s, want %s", got.Phase, tc.want)
			}
		})
	}
}

// A container that is to restart by its own policy or a rule shows the
// last sync's waiting reason; one that is done keeps its terminated state.
func TestWaitingReasonFollowsContainerRestartPolicy(t *testing.T) {
	crash := map[string]status.Reason{"a": {Reason: "CrashLoopBackOff", Message: "back-off"}}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		code int
		want string
	}{
		{"rule matched", withPolicy(pod(v1.RestartPolicyNever, nil, "a"), "a", v1.ContainerRestartPolicyNever, restartOn(42)), 42, "waiting CrashLoopBackOff"},
		{"rule not matched", withPolicy(pod(v1.RestartPolicyNever, nil, "a"), "a", v1.ContainerRestartPolicyNever, restartOn(42)), 1, `terminated 1  ""`},
		{"container Never in an Always pod", withPolicy(pod(v1.RestartPolicyAlways, nil, "a"), "a", v1.ContainerRestartPolicyNever), 1, `terminated 1  ""`},
		{"container Always in a Never pod", withPolicy(pod(v1.RestartPolicyNever, nil, "a"), "a", v1.ContainerRestartPolicyAlways), 0, "waiting CrashLoopBackOff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.Generate(status.Input{Pod: tc.pod, Runtime: observed(c("a", exited, tc.code, 0)), Waiting: crash, Now: now})
			if got := terminated(s.ContainerStatuses[0].State); got != tc.want {
				t.Errorf("state %s, want %s", got, tc.want)
			}
		})
	}
}
