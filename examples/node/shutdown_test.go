package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/syncbuf"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// stopTimeouts is fakecri recording the timeout of each StopContainer.
type stopTimeouts struct {
	*fakecri.Runtime
	mu       sync.Mutex
	timeouts []int64
}

func (s *stopTimeouts) StopContainer(ctx context.Context, id string, timeout int64) error {
	s.mu.Lock()
	s.timeouts = append(s.timeouts, timeout)
	s.mu.Unlock()
	return s.Runtime.StopContainer(ctx, id, timeout)
}

func (s *stopTimeouts) list() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.timeouts...)
}

// runStaticNode runs the command over fakecri with one static pod and
// the given extra KubeletConfiguration lines until the pod runs, then
// ends its context (as a stop signal does) and returns once run has,
// with the runtime's recorder.
func runStaticNode(t *testing.T, extra string) (*stopTimeouts, string) {
	t.Helper()
	dir := t.TempDir()
	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.92.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &stopTimeouts{Runtime: fake}
	endpoint := serveFakeCRI(t, dir, fake, rec)
	manifests := filepath.Join(dir, "manifests")
	writeFile(t, filepath.Join(manifests, "web.yaml"), `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: c, image: busybox}]
`)
	config := filepath.Join(dir, "config.yaml")
	writeFile(t, config, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupsPerQOS: false
staticPodPath: %s
fileCheckFrequency: 1s
address: 127.0.0.1
port: %d
containerRuntimeEndpoint: %s
podLogsDir: %s
resolvConf: ""
%s`, manifests, freePort(t), endpoint, filepath.Join(dir, "logs"), extra))
	var errOut syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{config: config, rootDir: filepath.Join(dir, "root"), hostnameOverride: "edge-4"}, &errOut)
	}()
	eventually(t, 30*time.Second, "the static pod's container running", func() (bool, string) {
		cs, err := fake.ListContainers(context.Background(), &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		return err == nil && len(cs) == 1, errOut.String()
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run = %v\n%s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not return within 30s of its context ending\n%s", errOut.String())
	}
	cs, err := fake.ListContainers(context.Background(), &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		t.Fatal(err)
	}
	return rec, fmt.Sprintf("%d running\n%s", len(cs), errOut.String())
}

// With shutdownGracePeriod set, a stop terminates the static pod within
// it (its own 30s capped to 20s) before the node stops, and run returns
// nil.
func TestStopWithShutdownGracePeriodTerminatesPods(t *testing.T) {
	rec, out := runStaticNode(t, "shutdownGracePeriod: 20s\n")
	if got := rec.list(); len(got) != 1 || got[0] != 20 {
		t.Errorf("StopContainer timeouts %v, want [20]", got)
	}
	if !strings.HasPrefix(out, "0 running\n") || !strings.Contains(out, "terminating the pods before the node stops") {
		t.Errorf("after the stop: %s", out)
	}
}

// Without shutdownGracePeriod the pods are left running.
func TestStopWithoutShutdownGracePeriodLeavesPods(t *testing.T) {
	rec, out := runStaticNode(t, "")
	if got := rec.list(); len(got) != 0 || !strings.HasPrefix(out, "1 running\n") {
		t.Errorf("StopContainer timeouts %v; %s", got, out)
	}
}
