package cri_test

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// A pod synced on the in-memory runtime: the first round creates the
// sandbox and starts the container; the next has nothing to do.
func Example() {
	ctx := context.Background()
	fake, _ := fakecri.New(fakecri.Config{})
	logs, _ := os.MkdirTemp("", "cri-example-")
	defer os.RemoveAll(logs)
	rt, _ := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: logs})

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "httpd", Image: "busybox:1.36", Command: []string{"httpd", "-f"}}},
		},
	}
	for round := 1; round <= 2; round++ {
		status, _ := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		result := rt.SyncPod(ctx, pod, status)
		fmt.Printf("round %d: %d steps, error %v\n", round, len(result.Steps), result.Error())
	}
	status, _ := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	c := status.FindContainerStatus("httpd")
	fmt.Println(c.Name, c.State, c.ID.Type, status.IPs)
	// Output:
	// round 1: 2 steps, error <nil>
	// round 2: 0 steps, error <nil>
	// httpd running fakecri [127.88.0.1]
}

// ComputePodActions is pure: it can be asked what a sync would do.
func ExampleComputePodActions() {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "uid-job"},
		Spec: v1.PodSpec{
			RestartPolicy:  v1.RestartPolicyOnFailure,
			InitContainers: []v1.Container{{Name: "migrate", Image: "busybox:1.36"}},
			Containers:     []v1.Container{{Name: "work", Image: "busybox:1.36"}},
		},
	}
	observed := &runtime.PodStatus{
		SandboxStatuses: []*runtime.SandboxStatus{{ID: "sb1", State: runtime.SandboxStateReady, IPs: []string{"127.88.0.9"}}},
		ContainerStatuses: []*runtime.ContainerStatus{
			{Name: "migrate", State: runtime.ContainerStateExited, ExitCode: 0},
		},
	}
	a := cri.ComputePodActions(pod, observed, nil)
	fmt.Println(a.CreateSandbox, a.SandboxID, a.InitContainersToStart, a.ContainersToStart)
	// Output: false sb1 [] [0]
}

// VisitPods lends each listed pod for the length of the call, in memory
// the next list reuses, as the generic PLEG relists every second; a pod
// kept beyond the call is cloned.
func ExampleRuntime_VisitPods() {
	ctx := context.Background()
	fake, _ := fakecri.New(fakecri.Config{})
	logs, _ := os.MkdirTemp("", "cri-example-")
	defer os.RemoveAll(logs)
	rt, _ := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: logs})
	for _, name := range []string{"a", "b"} {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1.36"}}},
		}
		rt.SyncPod(ctx, pod, nil)
	}
	var kept *runtime.Pod
	err := rt.VisitPods(ctx, true, func(p *runtime.Pod) {
		fmt.Println(p.FullName(), len(p.Sandboxes), "sandbox,", len(p.Containers), "container")
		if p.Name == "b" {
			kept = p.Clone()
		}
	})
	fmt.Println(err, kept.FullName())
	// Output:
	// default/a 1 sandbox, 1 container
	// default/b 1 sandbox, 1 container
	// <nil> default/b
}
