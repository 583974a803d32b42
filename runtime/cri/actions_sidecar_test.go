package cri_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// probeResults is a scripted cri.ProbeResults keyed by container name.
type probeResults struct {
	liveness, startup map[string]cri.ProbeResult
}

func (p probeResults) Liveness(id runtime.ContainerID) cri.ProbeResult {
	return p.liveness[id.ID[len("id-"):]]
}
func (p probeResults) Startup(id runtime.ContainerID) cri.ProbeResult {
	return p.startup[id.ID[len("id-"):]]
}

// sidecarPod has init containers "sc1" (a sidecar with a startup probe),
// "init" (regular) and "sc2" (a sidecar), and a container "app".
func sidecarPod(policy v1.RestartPolicy) *v1.Pod {
	p := testPod(policy, []string{"sc1", "init", "sc2"}, "app")
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers[0].RestartPolicy = &always
	p.Spec.InitContainers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	p.Spec.InitContainers[2].RestartPolicy = &always
	return p
}

func TestComputePodActionsSidecarsAndProbes(t *testing.T) {
	never, always := v1.RestartPolicyNever, v1.RestartPolicyAlways
	sb := func() []*runtime.SandboxStatus { return []*runtime.SandboxStatus{readySandbox(0)} }
	killed := func(name, msg string) cri.ContainerToKill {
		return cri.ContainerToKill{ID: runtime.ContainerID{Type: "fake", ID: "id-" + name}, Name: name, Message: msg}
	}
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		probes probeResults
		obs    func(*v1.Pod) observed
		want   cri.PodActions
	}{
		{
			name:   "sidecar running but its startup probe has not passed: wait",
			pod:    sidecarPod(never),
			probes: probeResults{startup: map[string]cri.ProbeResult{}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "sc1", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb"},
		},
		{
			name:   "sidecar started: the next init container runs",
			pod:    sidecarPod(never),
			probes: probeResults{startup: map[string]cri.ProbeResult{"sc1": cri.ProbeSuccess}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "sc1", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{1}},
		},
		{
			name:   "regular init done: the second sidecar starts",
			pod:    sidecarPod(never),
			probes: probeResults{startup: map[string]cri.ProbeResult{"sc1": cri.ProbeSuccess}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "init", exited, 0), ctr(p, "sc1", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{2}},
		},
		{
			name:   "all init containers through: the app starts",
			pod:    sidecarPod(never),
			probes: probeResults{startup: map[string]cri.ProbeResult{"sc1": cri.ProbeSuccess}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "sc2", running, 0), ctr(p, "init", exited, 0), ctr(p, "sc1", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0}},
		},
		{
			name:   "a sidecar that exited is restarted even under Never",
			pod:    sidecarPod(never),
			probes: probeResults{startup: map[string]cri.ProbeResult{"sc1": cri.ProbeSuccess}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "app", running, 0), ctr(p, "sc2", exited, 1), ctr(p, "init", exited, 0), ctr(p, "sc1", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{2}},
		},
		{
			name:   "the app finished under Never: the pod is killed, sidecars are not restarted",
			pod:    sidecarPod(never),
			probes: probeResults{startup: map[string]cri.ProbeResult{"sc1": cri.ProbeSuccess}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "app", exited, 0), ctr(p, "sc2", exited, 143), ctr(p, "init", exited, 0), ctr(p, "sc1", running, 0)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
		{
			name: "a sidecar failing liveness is killed and restarted",
			pod: func() *v1.Pod {
				p := sidecarPod(always)
				p.Spec.InitContainers[2].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
				return p
			}(),
			probes: probeResults{startup: map[string]cri.ProbeResult{"sc1": cri.ProbeSuccess}, liveness: map[string]cri.ProbeResult{"sc2": cri.ProbeFailure}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "app", running, 0), ctr(p, "sc2", running, 0), ctr(p, "init", exited, 0), ctr(p, "sc1", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{2}, ContainersToKill: []cri.ContainerToKill{
				killed("sc2", "Init container sc2 failed liveness probe"),
			}},
		},
		{
			name:   "liveness failure restarts a container under Always",
			pod:    testPod(always, nil, "a"),
			probes: probeResults{liveness: map[string]cri.ProbeResult{"a": cri.ProbeFailure}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0}, ContainersToKill: []cri.ContainerToKill{
				killed("a", "Container a failed liveness probe, will be restarted"),
			}},
		},
		{
			name:   "liveness failure under Never kills without a restart",
			pod:    testPod(never, nil, "a", "b"),
			probes: probeResults{liveness: map[string]cri.ProbeResult{"a": cri.ProbeFailure}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", running, 0), ctr(p, "b", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToKill: []cri.ContainerToKill{killed("a", "Container a failed liveness probe")}},
		},
		{
			name:   "startup failure restarts the container",
			pod:    testPod(v1.RestartPolicyOnFailure, nil, "a"),
			probes: probeResults{startup: map[string]cri.ProbeResult{"a": cri.ProbeFailure}},
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "a", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0}, ContainersToKill: []cri.ContainerToKill{
				killed("a", "Container a failed startup probe, will be restarted"),
			}},
		},
		{
			name: "ephemeral containers start once, even during init",
			pod: func() *v1.Pod {
				p := testPod(always, []string{"i"}, "a")
				p.Spec.EphemeralContainers = []v1.EphemeralContainer{
					{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "busybox:1.36"}},
					{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "done", Image: "busybox:1.36"}},
				}
				return p
			}(),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{{ID: runtime.ContainerID{ID: "id-done"}, Name: "done", State: exited}, ctr(p, "i", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", EphemeralContainersToStart: []int{0}},
		},
		{
			name: "a new sandbox with sidecars starts the first init container only",
			pod:  sidecarPod(always),
			obs:  func(*v1.Pod) observed { return observed{} },
			want: cri.PodActions{KillPod: true, CreateSandbox: true, InitContainersToStart: []int{0}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var probes cri.ProbeResults
			if tc.probes.liveness != nil || tc.probes.startup != nil {
				probes = tc.probes
			}
			got := cri.ComputePodActions(tc.pod, tc.obs(tc.pod).status(), probes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}
