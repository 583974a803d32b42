package cri_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// TestComputePodActionsInitScanFromTheLast covers the init-container
// rules that depend on scanning from the last init container backwards:
// a later init container or sidecar that has run proves that the earlier
// ones ran, even when the runtime no longer shows them.
func TestComputePodActionsInitScanFromTheLast(t *testing.T) {
	always, never := v1.RestartPolicyAlways, v1.RestartPolicyNever
	sb := func() []*runtime.SandboxStatus { return []*runtime.SandboxStatus{readySandbox(0)} }
	killed := func(name, msg string) cri.ContainerToKill {
		return cri.ContainerToKill{ID: runtime.ContainerID{Type: "fake", ID: "id-" + name}, Name: name, Message: msg}
	}
	restartable := v1.ContainerRestartPolicyAlways
	// sidecars makes the named init containers sidecars.
	sidecars := func(p *v1.Pod, names ...string) *v1.Pod {
		for i := range p.Spec.InitContainers {
			for _, n := range names {
				if p.Spec.InitContainers[i].Name == n {
					p.Spec.InitContainers[i].RestartPolicy = &restartable
				}
			}
		}
		return p
	}
	liveness := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		probes cri.ProbeResults
		obs    func(*v1.Pod) observed
		want   cri.PodActions
	}{
		{
			name: "only the last init container is left and it runs: nothing to do",
			pod:  testPod(always, []string{"i1", "i2", "i3"}, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i3", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb"},
		},
		{
			name: "only the last init container is left and it succeeded: the regular containers start",
			pod:  testPod(always, []string{"i1", "i2"}, "a", "b"),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i2", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0, 1}},
		},
		{
			name: "the last init container is stuck in created: only it is started again",
			pod:  testPod(always, []string{"i1", "i2", "i3"}, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i3", created, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{2}},
		},
		{
			name: "an exited first sidecar with a later one running: only it restarts, and the regular containers start",
			pod:  sidecars(testPod(always, []string{"sc1", "sc2"}, "a"), "sc1", "sc2"),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "sc2", running, 0), ctr(p, "sc1", exited, 1)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0}, ContainersToStart: []int{0}},
		},
		{
			name: "exited sidecars before and after a running one: both restart",
			pod:  sidecars(testPod(always, []string{"sc1", "sc2", "sc3"}, "a"), "sc1", "sc2", "sc3"),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "sc3", exited, 1), ctr(p, "sc2", running, 0), ctr(p, "sc1", exited, 1)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0, 2}},
		},
		{
			name: "a missing sidecar before a regular init container that succeeded: the sidecar and the regular containers start",
			pod:  sidecars(testPod(always, []string{"sc", "init"}, "a"), "sc"),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "init", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0}, ContainersToStart: []int{0}},
		},
		{
			name: "a regular init container that succeeded but was OOM-killed has failed",
			pod:  testPod(always, []string{"i1"}, "a"),
			obs: func(p *v1.Pod) observed {
				st := ctr(p, "i1", exited, 0)
				st.Reason = "OOMKilled"
				return observed{sb(), []*runtime.ContainerStatus{st}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0}},
		},
		{
			name: "a regular container of an older sandbox does not mark the pod initialized",
			pod:  testPod(always, []string{"i1"}, "a"),
			obs: func(p *v1.Pod) observed {
				old := ctr(p, "a", exited, 0)
				old.SandboxID = "old"
				return observed{sb(), []*runtime.ContainerStatus{old}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0}},
		},
		{
			name: "a regular container of the current sandbox marks the pod initialized",
			pod:  testPod(always, []string{"i1"}, "a"),
			obs: func(p *v1.Pod) observed {
				cur := ctr(p, "a", exited, 0)
				cur.SandboxID = "sb"
				return observed{sb(), []*runtime.ContainerStatus{cur}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0}},
		},
		{
			name: "the last sidecar fails liveness: it restarts and the regular containers still start",
			pod: func() *v1.Pod {
				p := sidecars(testPod(always, []string{"init", "sc"}, "a", "b"), "sc")
				p.Spec.InitContainers[1].LivenessProbe = liveness
				return p
			}(),
			probes: probeResults{liveness: map[string]cri.ProbeResult{"sc": cri.ProbeFailure}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "b", running, 0), ctr(p, "sc", running, 0), ctr(p, "init", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{1}, ContainersToStart: []int{0}, ContainersToKill: []cri.ContainerToKill{
				killed("sc", "Init container sc failed liveness probe"),
			}},
		},
		{
			name: "the last sidecar's spec changed before any regular container ran: it restarts and the regular containers start",
			pod:  sidecars(testPod(always, []string{"sc"}, "a"), "sc"),
			obs: func(p *v1.Pod) observed {
				st := ctr(p, "sc", running, 0)
				st.Hash++
				return observed{sb(), []*runtime.ContainerStatus{st}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0}, ContainersToStart: []int{0}, ContainersToKill: []cri.ContainerToKill{
				killed("sc", "Init container sc definition changed"),
			}},
		},
		{
			name: "an earlier sidecar's spec changed: it restarts, the next init container starts",
			pod:  sidecars(testPod(always, []string{"sc", "init"}, "a"), "sc"),
			obs: func(p *v1.Pod) observed {
				st := ctr(p, "sc", running, 0)
				st.Hash++
				return observed{sb(), []*runtime.ContainerStatus{st}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0, 1}, ContainersToKill: []cri.ContainerToKill{
				killed("sc", "Init container sc definition changed"),
			}},
		},
		{
			name:   "a sidecar that failed its startup probe restarts and holds back the next init container",
			pod:    sidecarPod(always),
			probes: probeResults{startup: map[string]cri.ProbeResult{"sc1": cri.ProbeFailure}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "sc1", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0}, ContainersToKill: []cri.ContainerToKill{
				killed("sc1", "Init container sc1 failed startup probe"),
			}},
		},
		{
			name:   "a sidecar without a liveness probe is not killed for a liveness result",
			pod:    sidecars(testPod(always, []string{"sc"}, "a"), "sc"),
			probes: probeResults{liveness: map[string]cri.ProbeResult{"sc": cri.ProbeFailure}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", running, 0), ctr(p, "sc", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb"},
		},
		{
			name: "Never, a regular init container in an unknown state: the pod is killed",
			pod:  testPod(never, []string{"i1", "i2"}, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "i2", unknown, 0), ctr(p, "i1", exited, 0)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
		{
			name: "Never, a sidecar in an unknown state: killed and restarted",
			pod:  sidecars(testPod(never, []string{"sc"}, "a"), "sc"),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", running, 0), ctr(p, "sc", unknown, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0}, ContainersToKill: []cri.ContainerToKill{
				killed("sc", `Init container is in "unknown" state, try killing it before restart`),
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cri.ComputePodActions(tc.pod, tc.obs(tc.pod).status(), tc.probes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}
