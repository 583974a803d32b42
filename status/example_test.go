package status_test

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// A job pod whose only container exited 0 under restartPolicy Never has
// succeeded; its Ready condition says why it is not ready.
func ExampleGenerate() {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "uid-job"},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "work", Image: "busybox:1.36"}}},
	}
	observed := &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{{
		ID: runtime.ContainerID{Type: "containerd", ID: "abc"}, Name: "work",
		State: runtime.ContainerStateExited, ExitCode: 0, Reason: "Completed",
	}}}
	st := status.Generate(status.Input{Pod: pod, Runtime: observed, Now: time.Now()})
	fmt.Println(st.Phase, st.ContainerStatuses[0].State.Terminated.Reason)
	for _, c := range st.Conditions {
		if c.Type == v1.PodReady {
			fmt.Println(c.Type, c.Status, c.Reason)
		}
	}
	// Output:
	// Succeeded Completed
	// Ready False PodCompleted
}
