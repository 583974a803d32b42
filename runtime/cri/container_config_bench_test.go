package cri

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/fakecri"
)

// BenchmarkContainerConfig builds the config of one container of pods of
// growing size, with the QoS class computed once for the sync as SyncPod
// does: the cost per container should not depend on the container count.
//
//	go test -run '^$' -bench BenchmarkContainerConfig -benchmem ./runtime/cri/
func BenchmarkContainerConfig(b *testing.B) {
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(Config{RuntimeService: fake, ImageService: fake, PodLogsDir: b.TempDir(), PodsDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	img := &runtimeapi.Image{Id: "sha256:1"}
	for _, n := range []int{10, 100, 1000, 10000} {
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "p", "ns", "uid-p"
		for i := range n {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
				Name: fmt.Sprint("c", i), Image: "busybox:1.36",
				Env:       []v1.EnvVar{{Name: "A", Value: "1"}},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")}},
			})
		}
		b.Run(fmt.Sprint("containers=", n), func(b *testing.B) {
			s := specOf(pod, "regular", n/2)
			s.qos = qosClass(pod) // once per sync
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.containerConfig(context.Background(), pod, s, 0, img, []string{"10.0.0.1"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
