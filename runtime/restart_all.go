package runtime

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/podutil"
)

// RestartAllTriggered reports whether the newest instance of one of the
// pod's init or regular containers exited with a code that the first
// matching rule of its restartPolicyRules gives the action
// RestartAllContainers: the runtime half of the kubelet's
// ShouldAllContainersRestart. It holds until that instance is removed.
//
// It is the one rule both the sync decision (runtime/cri, which then
// removes every container so that all start again) and the pod's status
// (status: the AllContainersRestarting condition) use. It is a pure
// function; status may be empty but not nil.
func RestartAllTriggered(pod *v1.Pod, status *PodStatus) bool {
	for _, list := range [2][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			st := status.FindContainerStatus(list[i].Name)
			if st != nil && st.State == ContainerStateExited && podutil.RestartsAllContainers(&list[i], int32(st.ExitCode)) {
				return true
			}
		}
	}
	return false
}
