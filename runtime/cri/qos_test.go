package cri_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// burstablePod has n containers with a CPU request each.
func burstablePod(n int) *v1.Pod {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprint("c", i)
	}
	pod := testPod(v1.RestartPolicyAlways, nil, names...)
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")}
	}
	return pod
}

// bytesPerContainer is what the first sync of an n-container pod
// allocates, per container.
func bytesPerContainer(t *testing.T, n int) uint64 {
	t.Helper()
	fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: t.TempDir(), PodsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pod := burstablePod(n)
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	res := rt.SyncPod(context.Background(), pod, nil)
	goruntime.ReadMemStats(&after)
	if err := res.Error(); err != nil || len(res.Steps) != n+1 {
		t.Fatalf("sync of %d containers: %d steps, %v", n, len(res.Steps), err)
	}
	return (after.TotalAlloc - before.TotalAlloc) / uint64(n)
}

// The QoS class is computed once per sync, not once per container: what
// a sync allocates per container does not grow with the pod's size.
func TestSyncCostPerContainerDoesNotGrowWithTheContainerCount(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 1000 containers")
	}
	small, big := bytesPerContainer(t, 100), bytesPerContainer(t, 1000)
	if big > small*3/2 {
		t.Errorf("a sync allocates %d bytes per container with 1000 containers, %d with 100: it grows with the count", big, small)
	}
}
