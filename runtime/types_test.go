package runtime_test

import (
	"testing"

	"github.com/nodekit/nodekit/runtime"
)

func TestRunningPod(t *testing.T) {
	st := &runtime.PodStatus{ID: "uid", Name: "p", Namespace: "ns",
		SandboxStatuses: []*runtime.SandboxStatus{{ID: "new", State: runtime.SandboxStateReady}, {ID: "old", State: runtime.SandboxStateNotReady}},
		ContainerStatuses: []*runtime.ContainerStatus{
			{Name: "a", State: runtime.ContainerStateRunning}, {Name: "b", State: runtime.ContainerStateExited}, {Name: "c", State: runtime.ContainerStateUnknown},
		}}
	p, empty := st.RunningPod(false)
	if empty || len(p.Containers) != 2 || len(p.Sandboxes) != 1 || p.FullName() != "ns/p" {
		t.Errorf("RunningPod(false) = %d containers, %d sandboxes, empty %v", len(p.Containers), len(p.Sandboxes), empty)
	}
	if p, _ := st.RunningPod(true); len(p.Sandboxes) != 2 || p.Sandboxes[1].State != runtime.ContainerStateExited {
		t.Errorf("RunningPod(true) sandboxes %v", p.Sandboxes)
	}
	done := &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{{Name: "a", State: runtime.ContainerStateExited}}}
	if _, empty := done.RunningPod(false); !empty {
		t.Error("a pod with nothing running is not empty")
	}
}
