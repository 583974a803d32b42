package criclient_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/fakecri"
)

// BenchmarkPodStartOverGRPC measures one pod start (RunPodSandbox,
// CreateContainer, StartContainer) against fakecri served on a unix
// socket, through criclient.Client.
func BenchmarkPodStartOverGRPC(b *testing.B) {
	ctx := context.Background()
	_, c := serveFake(b, fakecri.Config{Images: []string{"busybox:1.36"}, PodCIDR: "127.0.0.0/8"})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprint("p", i), Namespace: "bench", Uid: fmt.Sprint("uid-", i)}}
		sb, err := c.RunPodSandbox(ctx, sbCfg, "")
		if err != nil {
			b.Fatal(err)
		}
		id, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Image:    &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		}, sbCfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.StartContainer(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallOverhead compares the same calls made through criclient.Client
// and through the raw generated gRPC client on the same connection kind,
// so the difference is what Client adds (timeout context, error
// wrapping, response checks).
func BenchmarkCallOverhead(b *testing.B) {
	ctx := context.Background()
	fake, c := serveFake(b, fakecri.Config{Images: []string{"busybox:1.36"}})
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "bench", Uid: "u"}}
	sb, err := fake.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		b.Fatal(err)
	}
	id, err := fake.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}, sbCfg)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+socketOf(c.Endpoint()), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	raw := runtimeapi.NewRuntimeServiceClient(conn)

	b.Run("Version/raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := raw.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Version/client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Version(ctx, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ContainerStatus/raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := raw.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ContainerStatus/client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.ContainerStatus(ctx, id, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func socketOf(endpoint string) string { return endpoint[len("unix://"):] }
