package cri_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// TestComputePodActionsContainerRestartRules covers per-container
// restartPolicy and restartPolicyRules (the ContainerRestartRules
// feature, on by default since Kubernetes 1.35): the kubelet's cases
// (kuberuntime_manager_test.go, TestComputePodActionsWithContainerRestartRules)
// and those of the NodeConformance specs "Container Restart Rules".
func TestComputePodActionsContainerRestartRules(t *testing.T) {
	always, onFailure, never := v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever
	cAlways, cOnFailure, cNever := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	restartOn := func(codes ...int32) []v1.ContainerRestartRule {
		return []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}}
	}
	// set gives the named container (regular or init) a restartPolicy and
	// rules.
	set := func(p *v1.Pod, name string, policy v1.ContainerRestartPolicy, rules []v1.ContainerRestartRule) *v1.Pod {
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
	sb := func() []*runtime.SandboxStatus { return []*runtime.SandboxStatus{readySandbox(0)} }
	deadSandbox := func() []*runtime.SandboxStatus {
		s := readySandbox(0)
		s.State = runtime.SandboxStateNotReady
		return []*runtime.SandboxStatus{s}
	}
	killed := func(name, msg string) cri.ContainerToKill {
		return cri.ContainerToKill{ID: runtime.ContainerID{Type: "fake", ID: "id-" + name}, Name: name, Message: msg}
	}
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		probes cri.ProbeResults
		obs    func(*v1.Pod) observed
		want   cri.PodActions
	}{
		{
			name: "container Always in a Never pod: restarted after exit 0 and after a failure",
			pod:  set(set(testPod(never, nil, "a", "b"), "a", cAlways, nil), "b", cAlways, nil),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", exited, 0), ctr(p, "b", exited, 111)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0, 1}},
		},
		{
			name: "container OnFailure in a Never pod: only the failed one is restarted",
			pod:  set(set(testPod(never, nil, "a", "b"), "a", cOnFailure, nil), "b", cOnFailure, nil),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", exited, 0), ctr(p, "b", exited, 111)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{1}},
		},
		{
			name: "container OnFailure: one created but never started is started",
			pod:  set(set(testPod(never, nil, "a", "b"), "a", cOnFailure, nil), "b", cOnFailure, nil),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", exited, 0), ctr(p, "b", created, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{1}},
		},
		{
			name: "container Never in an Always pod: not restarted, the pod is done",
			pod:  set(set(testPod(always, nil, "a", "b"), "a", cNever, nil), "b", cNever, nil),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", exited, 0), ctr(p, "b", exited, 111)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
		{
			name: "container Never beside a running one: nothing to do",
			pod:  set(testPod(always, nil, "a", "b"), "a", cNever, nil),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", exited, 1), ctr(p, "b", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb"},
		},
		{
			name: "dead sandbox: every container again but the one whose own policy is OnFailure and succeeded",
			pod:  set(testPod(always, nil, "a", "b", "c"), "b", cOnFailure, nil),
			obs: func(p *v1.Pod) observed {
				return observed{deadSandbox(), []*runtime.ContainerStatus{ctr(p, "a", running, 0), ctr(p, "b", exited, 0), ctr(p, "c", running, 0)}}
			},
			want: cri.PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb", Attempt: 1, ContainersToStart: []int{0, 2}},
		},
		{
			name: "dead sandbox of an OnFailure pod: a container whose own policy is Always runs again though it succeeded",
			pod:  set(testPod(onFailure, nil, "a", "b"), "a", cAlways, nil),
			obs: func(p *v1.Pod) observed {
				return observed{deadSandbox(), []*runtime.ContainerStatus{ctr(p, "a", exited, 0), ctr(p, "b", exited, 0)}}
			},
			want: cri.PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb", Attempt: 1, ContainersToStart: []int{0}},
		},
		{
			name: "rule matches the exit code: restarted despite Never",
			pod:  set(testPod(never, nil, "main"), "main", cNever, restartOn(42)),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "main", exited, 42)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0}},
		},
		{
			name: "rule does not match: container Never decides, the pod is done",
			pod:  set(testPod(never, nil, "main"), "main", cNever, restartOn(42)),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "main", exited, 1)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
		{
			name: "rule does not match: container Always decides",
			pod:  set(testPod(never, nil, "main"), "main", cAlways, restartOn(42)),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "main", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0}},
		},
		{
			name: "rule matches, but the pod is being deleted: not restarted",
			pod: func() *v1.Pod {
				p := set(testPod(never, nil, "main"), "main", cNever, restartOn(42))
				p.DeletionTimestamp = &metav1.Time{Time: t0}
				return p
			}(),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "main", exited, 42)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
		{
			name:   "liveness failure, container Never in an Always pod: killed, not restarted",
			pod:    set(testPod(always, nil, "a", "b"), "a", cNever, nil),
			probes: probeResults{liveness: map[string]cri.ProbeResult{"a": cri.ProbeFailure}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", running, 0), ctr(p, "b", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToKill: []cri.ContainerToKill{killed("a", "Container a failed liveness probe")}},
		},
		{
			name:   "liveness failure, container OnFailure in a Never pod: killed and restarted",
			pod:    set(testPod(never, nil, "a"), "a", cOnFailure, nil),
			probes: probeResults{liveness: map[string]cri.ProbeResult{"a": cri.ProbeFailure}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0},
				ContainersToKill: []cri.ContainerToKill{killed("a", "Container a failed liveness probe, will be restarted")}},
		},
		{
			name:   "liveness failure: the rules are not looked at",
			pod:    set(testPod(always, nil, "a", "b"), "a", cNever, restartOn(137, 143)),
			probes: probeResults{liveness: map[string]cri.ProbeResult{"a": cri.ProbeFailure}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", running, 0), ctr(p, "b", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToKill: []cri.ContainerToKill{killed("a", "Container a failed liveness probe")}},
		},
		{
			name: "init container OnFailure in a Never pod failed: run again",
			pod:  set(testPod(never, []string{"i1"}, "a"), "i1", cOnFailure, nil),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i1", exited, 1)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0}},
		},
		{
			name: "init container Never in an Always pod failed: the pod has failed",
			pod:  set(testPod(always, []string{"i1"}, "a"), "i1", cNever, nil),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i1", exited, 1)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
		{
			name: "init container rule matches in a Never pod: run again",
			pod:  set(testPod(never, []string{"i1"}, "a"), "i1", cNever, restartOn(42)),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i1", exited, 42)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0}},
		},
		{
			name: "init container rule does not match: its Never decides",
			pod:  set(testPod(never, []string{"i1"}, "a"), "i1", cNever, restartOn(42)),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i1", exited, 3)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
		{
			name: "init container failed in a pod being deleted: the pod is killed",
			pod: func() *v1.Pod {
				p := testPod(always, []string{"i1"}, "a")
				p.DeletionTimestamp = &metav1.Time{Time: t0}
				return p
			}(),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i1", exited, 1)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
		{
			name: "init container OnFailure in unknown state in a Never pod: killed and run again",
			pod:  set(testPod(never, []string{"i1"}, "a"), "i1", cOnFailure, nil),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i1", unknown, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0},
				ContainersToKill: []cri.ContainerToKill{killed("i1", "Init container is in \"unknown\" state, try killing it before restart")}},
		},
		{
			name: "init container Never in unknown state in an Always pod: the pod has failed",
			pod:  set(testPod(always, []string{"i1"}, "a"), "i1", cNever, nil),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i1", unknown, 0)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.obs(tc.pod).status()
			got := cri.ComputePodActions(tc.pod, status, tc.probes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}
