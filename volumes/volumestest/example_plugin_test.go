package volumestest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volumes"
	"github.com/nodekit/nodekit/volumes/volumestest"
)

// A fake plugin stands in for a volume type in a test: here its first
// SetUp fails, as a remote volume might, and the manager retries it.
func ExamplePlugin() {
	fake := volumestest.New("example.com/remote", func(v *v1.Volume) bool { return v.NFS != nil }, volumes.Attributes{Managed: true})
	fake.Fail(errors.New("server not responding"))
	podsDir, _ := os.MkdirTemp("", "pods")
	defer os.RemoveAll(podsDir)
	m, _ := volumes.New(volumes.Config{PodsDir: podsDir, Plugins: []volumes.Plugin{fake}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	pod := pod(v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}})
	m.AddPod(pod)
	fmt.Println(m.WaitForAttachAndMount(ctx, pod))
	// The manager retries after 500ms; each wait returns the last error
	// at once, as the agent retries a pod with its own back-off.
	for i := 0; i < 100 && m.WaitForAttachAndMount(ctx, pod) != nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println(len(fake.SetUps()), "SetUp calls")
	// Output:
	// unmounted volumes=[data], unattached volumes=[], failed to process volumes=[]: pod default/p: spec.volumes[0] (data): server not responding
	// 2 SetUp calls
}
