package fakecri_test

import (
	"context"
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/fakecri"
)

// BenchmarkPodStart measures one pod start in process: RunPodSandbox,
// CreateContainer and StartContainer.
func BenchmarkPodStart(b *testing.B) {
	ctx := context.Background()
	rt, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}, PodCIDR: "127.0.0.0/8"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprint("p", i), Namespace: "bench", Uid: fmt.Sprint("uid-", i)}}
		sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
		if err != nil {
			b.Fatal(err)
		}
		id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Image:    &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		}, sbCfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
