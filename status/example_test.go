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

// A subscriber learns that statuses changed without polling; however
// many changes happen before it looks, one signal is pending.
func ExampleManager_Subscribe() {
	m := status.New(status.Config{})
	changes, cancel := m.Subscribe()
	defer cancel()

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"}}
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodPending})
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning})
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning}) // no change

	<-changes
	for _, p := range m.Pods() {
		fmt.Println(p.Name, p.Status.Phase, m.Version(p.UID))
	}
	select {
	case <-changes:
		fmt.Println("another signal")
	default:
		fmt.Println("nothing more pending")
	}
	// Output:
	// web Running 2
	// nothing more pending
}
