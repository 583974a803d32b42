package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// stopRecorder is fakecri recording, per container name, the timeout of
// each StopContainer call made while the container ran.
type stopRecorder struct {
	*fakecri.Runtime
	mu    sync.Mutex
	stops map[string][]int64
}

func (s *stopRecorder) StopContainer(ctx context.Context, id string, timeout int64) error {
	if st, err := s.Runtime.ContainerStatus(ctx, id, false); err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
		s.mu.Lock()
		name := st.GetStatus().GetMetadata().GetName()
		s.stops[name] = append(s.stops[name], timeout)
		s.mu.Unlock()
	}
	return s.Runtime.StopContainer(ctx, id, timeout)
}

func (s *stopRecorder) stopsOf(name string) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.stops[name]...)
}

// startRecorded is start, with the agent on rec instead of fakecri itself.
func startRecorded(t *testing.T, rec *stopRecorder, dir string) *running {
	t.Helper()
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "node", Period: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: rec, ImageService: rec, Sources: []podsource.Source{src},
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "..", "logs"), PodsDir: filepath.Join(dir, "..", "pods"), ResolvConf: "-",
			CrashLoopBackOff: cri.BackOff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: t, a: a, fake: rec.Runtime, dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// writeSidecarManifest writes a pod with a sidecar "proxy" and a
// container "main" scripted by mainEnv, and a 5 s grace period.
func writeSidecarManifest(t *testing.T, dir, name, policy string, mainEnv ...string) {
	t.Helper()
	var env string
	for i := 0; i < len(mainEnv); i += 2 {
		env += fmt.Sprintf("{name: %s, value: %q}, ", mainEnv[i], mainEnv[i+1])
	}
	doc := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: proxy
    image: busybox:1.36
    restartPolicy: Always
  containers:
  - name: main
    image: busybox:1.36
    env: [%s]
`, name, policy, env)
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSidecarStoppedWithTheGraceThatRemains runs the whole agent on
// fakecri and checks the grace period a sidecar is stopped with when its
// pod terminates: what is left of the pod's grace period once the regular
// containers have exited, as the kubelet computes it.
func TestSidecarStoppedWithTheGraceThatRemains(t *testing.T) {
	t.Run("pod removed while its container runs", func(t *testing.T) {
		dir := manifestDir(t)
		// main takes 2 s to exit after SIGTERM: the sidecar then has
		// 5 - 2 = 3 s left.
		writeSidecarManifest(t, dir, "web", "Always", fakecri.EnvStopDelay, "2s")
		rec := &stopRecorder{Runtime: newFake(t), stops: map[string][]int64{}}
		r := startRecorded(t, rec, dir)
		eventually(t, "web runs", func() bool {
			p := r.pod("web")
			return p != nil && p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
		})
		if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
			t.Fatal(err)
		}
		eventuallyShowing(t, "web is gone", func() bool { return r.pod("web") == nil && len(rec.stopsOf("proxy")) > 0 },
			func() string {
				return fmt.Sprintf("main stops %v, proxy stops %v", rec.stopsOf("main"), rec.stopsOf("proxy"))
			})
		if got := rec.stopsOf("main"); len(got) != 1 || got[0] != 5 {
			t.Errorf("main stopped with %v s, want [5]", got)
		}
		if got := rec.stopsOf("proxy"); len(got) != 1 || got[0] != 3 {
			t.Errorf("proxy stopped with %v s, want [3]: the 5 s grace less the 2 s main took", got)
		}
	})
	t.Run("pod finished: the sidecar gets the pod's grace period", func(t *testing.T) {
		dir := manifestDir(t)
		writeSidecarManifest(t, dir, "job", "Never", fakecri.EnvExitAfter, "200ms")
		rec := &stopRecorder{Runtime: newFake(t), stops: map[string][]int64{}}
		r := startRecorded(t, rec, dir)
		eventuallyShowing(t, "job succeeds and its sidecar is stopped", func() bool {
			return r.phase("job") == v1.PodSucceeded && len(rec.stopsOf("proxy")) > 0
		}, func() string { return fmt.Sprintf("phase %q, proxy stops %v", r.phase("job"), rec.stopsOf("proxy")) })
		if got := rec.stopsOf("proxy"); len(got) != 1 || got[0] != 5 {
			t.Errorf("proxy stopped with %v s, want [5]: nothing else was left to stop", got)
		}
	})
}
