package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// A pod from an API-like source is resized in place: its container keeps
// running, the runtime applies the new resources, and the status shows
// them once the resize is done.
func Example_resize() {
	dir, _ := os.MkdirTemp("", "agent-resize-")
	defer os.RemoveAll(dir)
	fake, _ := fakecri.New(fakecri.Config{})
	api := podsource.NewChannel("api", 4)
	a, err := agent.New(agent.Config{
		NodeName:       "edge-1",
		RuntimeService: fake,
		ImageService:   fake,
		Sources:        []podsource.Source{api},
		CRI:            cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("2Gi"), v1.ResourcePods: resource.MustParse("10"),
		},
		Events: func(_ *v1.Pod, _, reason, _ string) {
			if reason == "ResizeStarted" || reason == "ResizeCompleted" {
				fmt.Println("event", reason)
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()

	sized := func(cpu, mem string) v1.ResourceRequirements {
		l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
		return v1.ResourceRequirements{Requests: l, Limits: l}
	}
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID, pod.Generation = "web", "default", types.UID("web-1"), 1
	pod.Spec.Containers = []v1.Container{{Name: "httpd", Image: "busybox:1.36", Resources: sized("250m", "64Mi")}}
	api.Send(ctx, podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{pod}})
	// running waits until the container runs with cpu as its CPU limit,
	// the resize over.
	running := func(cpu string) (v1.ContainerStatus, bool) {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			st, ok := a.PodStatus(pod.UID)
			if !ok || len(st.ContainerStatuses) != 1 {
				continue
			}
			c := st.ContainerStatuses[0]
			if c.State.Running != nil && c.Resources != nil && c.Resources.Limits.Cpu().String() == cpu && len(st.Conditions) > 0 && !resizing(st) {
				return c, true
			}
		}
		return v1.ContainerStatus{}, false
	}
	before, ok := running("250m")
	if !ok {
		fmt.Println("not running with 250m within 10s")
		cancel()
		<-done
		return
	}
	fmt.Println("running with", before.Resources.Limits.Cpu(), before.Resources.Limits.Memory())

	resized := pod.DeepCopy()
	resized.Generation = 2
	resized.Spec.Containers[0].Resources = sized("500m", "128Mi")
	api.Send(ctx, podsource.Update{Op: podsource.UPDATE, Pods: []*v1.Pod{resized}})
	after, ok := running("500m")
	if !ok {
		fmt.Println("not resized to 500m within 10s")
		cancel()
		<-done
		return
	}
	fmt.Println("running with", after.Resources.Limits.Cpu(), after.Resources.Limits.Memory(),
		"same container:", after.ContainerID == before.ContainerID, "restarts:", after.RestartCount)
	cancel()
	fmt.Println(<-done)
	// Output:
	// running with 250m 64Mi
	// event ResizeStarted
	// event ResizeCompleted
	// running with 500m 128Mi same container: true restarts: 0
	// <nil>
}

// resizing reports whether the status has a resize condition.
func resizing(s v1.PodStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
			return true
		}
	}
	return false
}
