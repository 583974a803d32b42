package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// An agent on the in-memory runtime runs a static pod from a manifest
// directory.
func Example() {
	dir, _ := os.MkdirTemp("", "agent-example-")
	defer os.RemoveAll(dir)
	manifests := filepath.Join(dir, "manifests")
	os.Mkdir(manifests, 0o755)
	os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte(`
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: httpd, image: "busybox:1.36"}]
`), 0o644)

	fake, _ := fakecri.New(fakecri.Config{})
	src, _ := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: "edge-1"})
	a, err := agent.New(agent.Config{
		NodeName:       "edge-1",
		RuntimeService: fake,
		ImageService:   fake,
		Sources:        []podsource.Source{src},
		CRI:            cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if pods := a.Pods(); len(pods) == 1 && pods[0].Status.Phase == v1.PodRunning {
			fmt.Println(pods[0].Name, pods[0].Status.Phase, pods[0].Status.PodIP)
			break
		}
	}
	cancel()
	fmt.Println(<-done)
	// Output:
	// web-edge-1 Running 127.88.0.1
	// <nil>
}
