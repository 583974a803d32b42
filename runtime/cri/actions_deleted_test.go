package cri_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// A pod marked for deletion never starts or restarts a regular container
// in its sandbox, as the kubelet's ShouldContainerBeRestarted rules:
// whatever still runs is left to the kill.
func TestComputePodActionsDeletedPodStartsNothing(t *testing.T) {
	now := metav1.NewTime(t0)
	for _, tc := range []struct {
		name string
		obs  func(*v1.Pod) observed
	}{
		{"an exited container under Always", func(p *v1.Pod) observed {
			return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "a", running, 0), ctr(p, "b", exited, 1)}}
		}},
		{"a container never started", func(p *v1.Pod) observed {
			return observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{ctr(p, "a", running, 0)}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "a", "b")
			pod.DeletionTimestamp = &now
			got := cri.ComputePodActions(pod, tc.obs(pod).status(), nil)
			if len(got.ContainersToStart) != 0 || got.CreateSandbox {
				t.Errorf("a deleted pod: %+v, want nothing started", got)
			}
		})
	}
}
