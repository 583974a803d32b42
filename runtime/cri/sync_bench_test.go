package cri_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// tenContainerPod is a realistic pod: ten containers with env, ports,
// resources and probes, all running in a ready sandbox and recording the
// hashes nodekit writes.
func tenContainerPod() (*v1.Pod, *runtime.PodStatus) {
	var names []string
	for i := 0; i < 10; i++ {
		names = append(names, fmt.Sprint("c", i))
	}
	pod := testPod(v1.RestartPolicyAlways, nil, names...)
	obs := observed{sandboxes: []*runtime.SandboxStatus{readySandbox(0)}}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.Env = []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)"}}
		c.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
		c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		// As nodekit creates them: both the kubelet's hash and SpecHash.
		st := ctr(pod, c.Name, running, 0)
		st.Annotations = map[string]string{cri.AnnotationSpecHash: strconv.FormatUint(cri.SpecHash(c), 16)}
		obs.containers = append(obs.containers, st)
	}
	return pod, obs.status()
}

func BenchmarkComputePodActions(b *testing.B) {
	pod, status := tenContainerPod()
	b.ReportAllocs()
	for b.Loop() {
		a := cri.ComputePodActions(pod, status, nil)
		if a.KillPod || len(a.ContainersToStart) > 0 {
			b.Fatal("actions for a healthy pod")
		}
	}
}

// BenchmarkSyncPodNothingToDo syncs a healthy 10-container pod on fakecri
// and checks that no CRI call at all is made.
func BenchmarkSyncPodNothingToDo(b *testing.B) {
	ctx := context.Background()
	fake, _ := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
	rt, err := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: b.TempDir(), PodsDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	pod, _ := tenContainerPod()
	if err := rt.SyncPod(ctx, pod, nil).Error(); err != nil {
		b.Fatal(err)
	}
	status, err := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		b.Fatal(err)
	}
	fake.ResetCalls()
	b.ReportAllocs()
	for b.Loop() {
		if res := rt.SyncPod(ctx, pod, status); len(res.Steps) != 0 {
			b.Fatalf("steps for a healthy pod: %v", res.Steps)
		}
	}
	if calls := fake.Calls(); len(calls) != 0 {
		b.Fatalf("a sync with nothing to do called the runtime: %v", slices.Compact(calls))
	}
}
