package cri

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// BenchmarkLogRotationListing measures what a log rotation check costs
// the agent before it stats the logs: the list of the running
// containers (100, one per sandbox, on fakecri served over a unix
// socket) and the forgetting of stopped ones' paths. "reused" lists as
// Run does, into the memory of its last listing; "new" as RotateLogs
// does.
//
//	go test -run '^$' -bench LogRotationListing -benchmem ./runtime/cri/
func BenchmarkLogRotationListing(b *testing.B) {
	const n = 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}, PodCIDR: "127.64.0.0/10"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		meta := &runtimeapi.PodSandboxMetadata{Name: fmt.Sprint("pod-", i), Namespace: "default", Uid: fmt.Sprint("uid-", i)}
		sb, err := fake.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: meta}, "")
		if err != nil {
			b.Fatal(err)
		}
		c, err := fake.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}, LogPath: "main/0.log",
		}, &runtimeapi.PodSandboxConfig{Metadata: meta, LogDirectory: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if err := fake.StartContainer(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	endpoint := "unix://" + filepath.Join(b.TempDir(), "cri.sock")
	lis, err := fakecri.ListenUnix(endpoint)
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- fakecri.NewServer(fake, fake).Serve(ctx, lis) }()
	defer func() { cancel(); <-served }()
	client, err := criclient.Dial(ctx, endpoint)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = client.Close(context.Background()) }()
	r, err := NewLogRotator(LogRotatorConfig{Runtime: client})
	if err != nil {
		b.Fatal(err)
	}
	var mem listMemory
	for _, bc := range []struct {
		name string
		mem  *listMemory
	}{{"reused", &mem}, {"new", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ids, err := r.running(ctx, bc.mem); err != nil || len(ids) != n {
					b.Fatalf("%d running containers listed, %v", len(ids), err)
				}
			}
		})
	}
}
