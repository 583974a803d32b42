package cri_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testPod(policy v1.RestartPolicy, inits []string, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "busybox:1.36"})
	}
	for _, n := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "busybox:1.36"})
	}
	return p
}

// observed builds a PodStatus: a ready sandbox (unless sandbox is nil)
// and containers, newest first.
type observed struct {
	sandboxes  []*runtime.SandboxStatus
	containers []*runtime.ContainerStatus
}

func readySandbox(attempt uint32) *runtime.SandboxStatus {
	return &runtime.SandboxStatus{ID: "sb", Attempt: attempt, State: runtime.SandboxStateReady, IPs: []string{"127.88.0.1"}, NetworkMode: runtime.NamespaceModePod}
}

func ctr(pod *v1.Pod, name string, state runtime.ContainerState, exit int) *runtime.ContainerStatus {
	st := &runtime.ContainerStatus{ID: runtime.ContainerID{Type: "fake", ID: "id-" + name}, Name: name, State: state, ExitCode: exit}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				st.Hash = cri.HashContainer(&cs[i])
			}
		}
	}
	return st
}

func (o observed) status() *runtime.PodStatus {
	return &runtime.PodStatus{ID: "uid-p", Name: "p", Namespace: "ns", SandboxStatuses: o.sandboxes, ContainerStatuses: o.containers}
}

const (
	running = runtime.ContainerStateRunning
	exited  = runtime.ContainerStateExited
	created = runtime.ContainerStateCreated
	unknown = runtime.ContainerStateUnknown
)

func TestComputePodActions(t *testing.T) {
	always, onFailure, never := v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever
	type tc struct {
		name string
		pod  *v1.Pod
		obs  func(*v1.Pod) observed
		want cri.PodActions
	}
	cases := []tc{
		{
			name: "new pod: create the sandbox and start every container",
			pod:  testPod(always, nil, "a", "b"),
			obs:  func(*v1.Pod) observed { return observed{} },
			want: cri.PodActions{KillPod: true, CreateSandbox: true, ContainersToStart: []int{0, 1}},
		},
		{
			name: "everything running: nothing to do",
			pod:  testPod(always, nil, "a", "b"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "a", running, 0), ctr(p, "b", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb"},
		},
		{
			name: "sandbox died: new sandbox with the next attempt, all containers again",
			pod:  testPod(always, nil, "a"),
			obs: func(p *v1.Pod) observed {
				sb := readySandbox(2)
				sb.State = runtime.SandboxStateNotReady
				return observed{[]*runtime.SandboxStatus{sb}, []*runtime.ContainerStatus{ctr(p, "a", exited, 137)}}
			},
			want: cri.PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb", Attempt: 3, ContainersToStart: []int{0}},
		},
		{
			name: "sandbox without an IP on the pod network is replaced",
			pod:  testPod(always, nil, "a"),
			obs: func(p *v1.Pod) observed {
				sb := readySandbox(0)
				sb.IPs = nil
				return observed{[]*runtime.SandboxStatus{sb}, []*runtime.ContainerStatus{ctr(p, "a", running, 0)}}
			},
			want: cri.PodActions{KillPod: true, CreateSandbox: true, Attempt: 1, ContainersToStart: []int{0}},
		},
		{
			name: "host network flipped: new sandbox",
			pod: func() *v1.Pod {
				p := testPod(always, nil, "a")
				p.Spec.HostNetwork = true
				return p
			}(),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "a", running, 0)}}
			},
			want: cri.PodActions{KillPod: true, CreateSandbox: true, Attempt: 1, ContainersToStart: []int{0}},
		},
		{
			name: "two ready sandboxes: start over",
			pod:  testPod(always, nil, "a"),
			obs: func(p *v1.Pod) observed {
				old := readySandbox(0)
				old.ID = "old"
				return observed{[]*runtime.SandboxStatus{readySandbox(1), old}, []*runtime.ContainerStatus{ctr(p, "a", running, 0)}}
			},
			want: cri.PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb", Attempt: 2, ContainersToStart: []int{0}},
		},
		{
			name: "Never, sandbox gone after the containers ran: the pod is done",
			pod:  testPod(never, nil, "a"),
			obs: func(p *v1.Pod) observed {
				sb := readySandbox(0)
				sb.State = runtime.SandboxStateNotReady
				return observed{[]*runtime.SandboxStatus{sb}, []*runtime.ContainerStatus{ctr(p, "a", exited, 0)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb", Attempt: 1},
		},
		{
			name: "OnFailure, new sandbox: containers that succeeded stay done",
			pod:  testPod(onFailure, nil, "ok", "bad"),
			obs: func(p *v1.Pod) observed {
				sb := readySandbox(0)
				sb.State = runtime.SandboxStateNotReady
				return observed{[]*runtime.SandboxStatus{sb}, []*runtime.ContainerStatus{ctr(p, "ok", exited, 0), ctr(p, "bad", exited, 1)}}
			},
			want: cri.PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb", Attempt: 1, ContainersToStart: []int{1}},
		},
		{
			name: "OnFailure, new sandbox, all succeeded: nothing to start, no sandbox",
			pod:  testPod(onFailure, nil, "ok"),
			obs: func(p *v1.Pod) observed {
				sb := readySandbox(0)
				sb.State = runtime.SandboxStateNotReady
				return observed{[]*runtime.SandboxStatus{sb}, []*runtime.ContainerStatus{ctr(p, "ok", exited, 0)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb", Attempt: 1},
		},
		{
			name: "new pod with init containers: the first init container only",
			pod:  testPod(always, []string{"i1", "i2"}, "a"),
			obs:  func(*v1.Pod) observed { return observed{} },
			want: cri.PodActions{KillPod: true, CreateSandbox: true, InitContainersToStart: []int{0}},
		},
		{
			name: "first init container done: start the second",
			pod:  testPod(always, []string{"i1", "i2"}, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "i1", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{1}},
		},
		{
			name: "init container running: wait",
			pod:  testPod(always, []string{"i1", "i2"}, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "i2", running, 0), ctr(p, "i1", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb"},
		},
		{
			name: "all init containers done: start the regular containers",
			pod:  testPod(always, []string{"i1", "i2"}, "a", "b"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "i2", exited, 0), ctr(p, "i1", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0, 1}},
		},
		{
			name: "init container failed, Always: restart it",
			pod:  testPod(always, []string{"i1", "i2"}, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "i2", exited, 1), ctr(p, "i1", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{1}},
		},
		{
			name: "init container failed, Never: the pod has failed",
			pod:  testPod(never, []string{"i1"}, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "i1", exited, 1)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
		{
			name: "init container in unknown state: kill it and run it again",
			pod:  testPod(onFailure, []string{"i1"}, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "i1", unknown, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", InitContainersToStart: []int{0}, ContainersToKill: []cri.ContainerToKill{
				{ID: runtime.ContainerID{Type: "fake", ID: "id-i1"}, Name: "i1", Message: `Init container is in "unknown" state, try killing it before restart`},
			}},
		},
		{
			name: "regular containers have run: init containers are not run again",
			pod:  testPod(always, []string{"i1"}, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "a", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb"},
		},
		{
			name: "Always restarts a container that exited 0",
			pod:  testPod(always, nil, "a", "b"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "a", exited, 0), ctr(p, "b", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0}},
		},
		{
			name: "OnFailure restarts only a failed container",
			pod:  testPod(onFailure, nil, "ok", "bad", "up"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "ok", exited, 0), ctr(p, "bad", exited, 2), ctr(p, "up", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{1}},
		},
		{
			name: "Never restarts nothing; with nothing running the pod is killed",
			pod:  testPod(never, nil, "a", "b"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "a", exited, 1), ctr(p, "b", exited, 0)}}
			},
			want: cri.PodActions{KillPod: true, SandboxID: "sb"},
		},
		{
			name: "created but never started: start a new one",
			pod:  testPod(never, nil, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "a", created, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0}},
		},
		{
			name: "unknown state: kill and restart",
			pod:  testPod(always, nil, "a"),
			obs: func(p *v1.Pod) observed {
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "a", unknown, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0}, ContainersToKill: []cri.ContainerToKill{
				{ID: runtime.ContainerID{Type: "fake", ID: "id-a"}, Name: "a", Message: `Container is in "unknown" state, try killing it before restart`},
			}},
		},
		{
			name: "spec hash changed: kill and restart",
			pod:  testPod(always, nil, "a", "b"),
			obs: func(p *v1.Pod) observed {
				a := ctr(p, "a", running, 0)
				a.Hash++
				return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{a, ctr(p, "b", running, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToStart: []int{0}, ContainersToKill: []cri.ContainerToKill{
				{ID: runtime.ContainerID{Type: "fake", ID: "id-a"}, Name: "a", Message: "Container a definition changed, will be restarted"},
			}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status := c.obs(c.pod).status()
			before := c.pod.DeepCopy()
			got := cri.ComputePodActions(c.pod, status, nil)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, c.pod); diff != "" {
				t.Errorf("ComputePodActions changed the pod:\n%s", diff)
			}
		})
	}
}

func TestHashContainerChangesWithSpec(t *testing.T) {
	a := v1.Container{Name: "a", Image: "busybox:1.36"}
	b := a
	b.Image = "busybox:1.37"
	if cri.HashContainer(&a) == cri.HashContainer(&b) {
		t.Error("different images hash the same")
	}
	c := a
	if cri.HashContainer(&a) != cri.HashContainer(&c) {
		t.Error("equal specs hash differently")
	}
}
