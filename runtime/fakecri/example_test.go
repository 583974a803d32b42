package fakecri_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// A container scripted through its environment: it exits with code 3 as
// soon as it starts, and reports it the way containerd does.
func Example() {
	ctx := context.Background()
	rt, _ := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
	sandboxConfig := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "demo", Namespace: "default", Uid: "uid-1"}}
	sb, _ := rt.RunPodSandbox(ctx, sandboxConfig, "")
	id, _ := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "crasher"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Envs:     []*runtimeapi.KeyValue{{Key: fakecri.EnvExitCode, Value: []byte("3")}},
	}, sandboxConfig)
	_ = rt.StartContainer(ctx, id)
	resp, _ := rt.ContainerStatus(ctx, id, false)
	st := resp.GetStatus()
	fmt.Println(st.GetState(), st.GetExitCode(), st.GetReason())

	sandbox, _ := rt.PodSandboxStatus(ctx, sb, false)
	fmt.Println(sandbox.GetStatus().GetNetwork().GetIp())
	// Output:
	// CONTAINER_EXITED 3 Error
	// 127.88.0.1
}

// Serving the runtime over gRPC, and dialling it as any CRI runtime.
func ExampleServer() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, _ := os.MkdirTemp("", "fakecri-example-")
	defer os.RemoveAll(dir)
	endpoint := "unix://" + filepath.Join(dir, "cri.sock")

	rt, _ := fakecri.New(fakecri.Config{})
	lis, err := fakecri.ListenUnix(endpoint)
	if err != nil {
		fmt.Println(err)
		return
	}
	served := make(chan error, 1)
	go func() { served <- fakecri.NewServer(rt, rt).Serve(ctx, lis) }()

	client, err := criclient.Dial(ctx, endpoint)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(client.RuntimeName(), client.RuntimeVersion())
	_ = client.Close(ctx)
	cancel()
	fmt.Println(<-served)
	// Output:
	// fakecri 0.1.0
	// <nil>
}

// Scripted disks: the node's filesystem fills up as containers write to
// their writable layers and logs, and a harness takes room away with
// SetDisks. DiskStats fills the figures into a summary (here an empty
// one; an agent uses server.CRIStats over the runtime).
func ExampleRuntime_DiskStats() {
	ctx := context.Background()
	rt, _ := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
	rt.SetDisks(fakecri.Disks{Node: fakecri.Filesystem{CapacityBytes: 1 << 30, Inodes: 1e6, UsedBytes: 500 << 20}})
	sandboxConfig := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "writer", Namespace: "default", Uid: "uid-1"}}
	sb, _ := rt.RunPodSandbox(ctx, sandboxConfig, "")
	id, _ := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Envs: []*runtimeapi.KeyValue{
			{Key: fakecri.EnvRootfsBytes, Value: []byte("100Mi")},
			{Key: fakecri.EnvLogBytes, Value: []byte("20Mi")},
		},
	}, sandboxConfig)
	_ = rt.StartContainer(ctx, id)

	stats := rt.DiskStats(emptySummary{})
	s, _ := stats.Summary(ctx)
	fmt.Printf("nodefs: %dMi free of %dMi\n", *s.Node.Fs.AvailableBytes>>20, *s.Node.Fs.CapacityBytes>>20)
	rt.SetDisks(fakecri.Disks{Node: fakecri.Filesystem{CapacityBytes: 1 << 30, Inodes: 1e6, UsedBytes: 850 << 20}})
	s, _ = stats.Summary(ctx)
	fmt.Printf("nodefs: %dMi free of %dMi\n", *s.Node.Fs.AvailableBytes>>20, *s.Node.Fs.CapacityBytes>>20)
	// Output:
	// nodefs: 400Mi free of 1024Mi
	// nodefs: 50Mi free of 1024Mi
}

type emptySummary struct{}

func (emptySummary) Summary(context.Context) (*statsapi.Summary, error) {
	return &statsapi.Summary{}, nil
}
