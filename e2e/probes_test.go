package e2e_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// TestProbesOnContainerd runs the agent on the e2e containerd with two
// probed pods: busybox httpd on the host network (127.0.0.1) with an HTTP
// readiness probe, which becomes Ready; and a container whose exec
// liveness probe (cat /tmp/healthy) starts failing, which is restarted.
func TestProbesOnContainerd(t *testing.T) {
	client, image := dialContainerd(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()

	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	os.Mkdir(manifests, 0o755)
	write := func(name, doc string) {
		if err := os.WriteFile(filepath.Join(manifests, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("web.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: httpd
    image: %s
    command: ["sh", "-c", "mkdir -p /www && echo ready > /www/ready.html && exec httpd -f -p 127.0.0.1:%d -h /www"]
    readinessProbe:
      httpGet: {path: /ready.html, port: %d}
      periodSeconds: 1
`, image, port, port))
	write("liveness.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: liveness}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; touch /tmp/healthy; sleep 3; rm /tmp/healthy; while true; do sleep 1; done"]
    livenessProbe:
      exec: {command: [cat, /tmp/healthy]}
      periodSeconds: 1
      failureThreshold: 2
      terminationGracePeriodSeconds: 1
`, image))

	node := "e2e-probes"
	src, err := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName: node, NodeIPs: []string{"127.0.0.1"}, RuntimeService: client, ImageService: client,
		Sources: []podsource.Source{src},
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-",
			CrashLoopBackOff: cri.BackOff{Initial: time.Second, Max: 2 * time.Second}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		removePodsOf(t, client, node)
	})

	find := func(name string) *v1.Pod {
		for _, p := range a.Pods() {
			if p.Name == name+"-"+node {
				return p
			}
		}
		return nil
	}
	wait := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not %s within %v", what, limit)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	wait("web Ready", 60*time.Second, func() bool {
		p := find("web")
		if p == nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
			}
		}
		return false
	})
	var restarts int32
	wait("the liveness pod restarted twice", 90*time.Second, func() bool {
		p := find("liveness")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		restarts = p.Status.ContainerStatuses[0].RestartCount
		return restarts >= 2
	})
	if p := find("liveness"); p.Status.ContainerStatuses[0].LastTerminationState.Terminated == nil {
		t.Errorf("no last termination state after %d restarts", restarts)
	}
}

// removePodsOf stops and removes every sandbox of the node's pods.
func removePodsOf(t *testing.T, c *criclient.Client, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := c.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Error(err)
		return
	}
	for _, s := range list {
		if strings.HasSuffix(s.GetMetadata().GetName(), "-"+node) {
			_ = c.StopPodSandbox(ctx, s.GetId())
			if err := c.RemovePodSandbox(ctx, s.GetId()); err != nil {
				t.Errorf("remove sandbox %s: %v", s.GetId(), err)
			}
		}
	}
}
