package cri_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// crashTimes runs a crashing container through n restarts.
func crashTimes(h *harness, pod *v1.Pod, n int) {
	h.t.Helper()
	for i := 0; i <= n; i++ {
		h.sync(pod)
		h.clock.Step(10 * time.Minute) // past any back-off
	}
}

func countContainers(h *harness, pod *v1.Pod) int {
	h.t.Helper()
	list, err := h.fake.ListContainers(h.ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(pod.UID)}})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(list)
}

func TestGarbageCollectPerPodContainer(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "crasher", "steady")
	withEnv(&pod.Spec.Containers[0], fakecri.EnvExitCode, "1")
	crashTimes(h, pod, 4) // 5 dead crasher instances, 1 running steady
	if n := countContainers(h, pod); n != 6 {
		t.Fatalf("%d containers before GC, want 6", n)
	}
	oldest := h.status(pod).ContainerStatusesByName("crasher")
	oldLog := oldest[len(oldest)-1].LogPath
	if _, err := os.Stat(oldLog); err != nil {
		t.Fatalf("the oldest log: %v", err)
	}

	gc := runtime.GarbageCollector(h.rt)
	if err := gc.GarbageCollect(h.ctx, runtime.GCPolicy{MaxPerPodContainer: 2, MaxContainers: -1}, nil); err != nil {
		t.Fatal(err)
	}
	left := h.status(pod).ContainerStatusesByName("crasher")
	if len(left) != 2 || left[0].RestartCount != 4 || left[1].RestartCount != 3 {
		t.Errorf("crasher instances left: %d (newest restart %d), want the newest 2", len(left), left[0].RestartCount)
	}
	if st := h.status(pod).FindContainerStatus("steady"); st == nil || st.State != runtime.ContainerStateRunning {
		t.Error("GC touched a running container")
	}
	if _, err := os.Stat(oldLog); !os.IsNotExist(err) {
		t.Errorf("the removed container's log is still there: %v", err)
	}
}

func TestGarbageCollectMinAgeAndNodeLimit(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	a := testPod(v1.RestartPolicyAlways, nil, "c")
	b := testPod(v1.RestartPolicyAlways, nil, "c")
	b.Name, b.UID = "b", "uid-b"
	for _, p := range []*v1.Pod{a, b} {
		withEnv(&p.Spec.Containers[0], fakecri.EnvExitCode, "1")
	}
	crashTimes(h, a, 3) // 4 dead
	crashTimes(h, b, 3) // 4 dead, newer

	// Nothing is old enough yet.
	if err := h.rt.GarbageCollect(h.ctx, runtime.GCPolicy{MinAge: 2 * time.Hour, MaxPerPodContainer: 0, MaxContainers: -1}, nil); err != nil {
		t.Fatal(err)
	}
	if countContainers(h, a)+countContainers(h, b) != 8 {
		t.Fatal("GC removed containers younger than MinAge")
	}
	// A node limit of 4 leaves each pod-container 2.
	if err := h.rt.GarbageCollect(h.ctx, runtime.GCPolicy{MaxPerPodContainer: -1, MaxContainers: 4}, nil); err != nil {
		t.Fatal(err)
	}
	if na, nb := countContainers(h, a), countContainers(h, b); na != 2 || nb != 2 {
		t.Errorf("after a node limit of 4: %d and %d, want 2 and 2", na, nb)
	}
}

func TestGarbageCollectGonePod(t *testing.T) {
	checkGonePodCollected(t, newHarness(t, fakecri.Config{}), true)
}

// The collector lists in brief over gRPC: a gone pod's sandbox, container
// and log directory (named from the sandbox's namespace, name and UID)
// go as with a runtime called in process.
func TestGarbageCollectOverGRPC(t *testing.T) {
	checkGonePodCollected(t, newHarness(t, fakecri.Config{}, func(c *cri.Config) {
		fake := c.RuntimeService.(*recorder).Runtime
		client, err := criclient.Dial(context.Background(), serveOnSocket(t, fake))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close(context.Background()) })
		c.RuntimeService, c.ImageService = client, client
	}), false)
}

// checkGonePodCollected: the collector keeps a live pod's newest sandbox
// and container (when liveFirst), and removes everything of a gone pod,
// its log directory included.
func checkGonePodCollected(t *testing.T, h *harness, liveFirst bool) {
	t.Helper()
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	h.sync(pod)
	if err := h.rt.KillPod(h.ctx, pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(h.logs, "ns_p_uid-p")
	if _, err := os.Stat(logDir); err != nil {
		t.Fatal(err)
	}
	policy := runtime.GCPolicy{MaxPerPodContainer: 1, MaxContainers: -1}
	if liveFirst {
		if err := h.rt.GarbageCollect(h.ctx, policy, func(types.UID) bool { return false }); err != nil {
			t.Fatal(err)
		}
		if st := h.status(pod); len(st.SandboxStatuses) != 1 || len(st.ContainerStatuses) != 1 {
			t.Fatalf("a live pod lost its newest sandbox or container: %d sandboxes, %d containers", len(st.SandboxStatuses), len(st.ContainerStatuses))
		}
	}
	gone := func(uid types.UID) bool { return uid == pod.UID }
	if err := h.rt.GarbageCollect(h.ctx, policy, gone); err != nil {
		t.Fatal(err)
	}
	if st := h.status(pod); len(st.SandboxStatuses) != 0 || len(st.ContainerStatuses) != 0 {
		t.Errorf("a gone pod kept %d sandboxes and %d containers", len(st.SandboxStatuses), len(st.ContainerStatuses))
	}
	if _, err := os.Stat(logDir); !os.IsNotExist(err) {
		t.Errorf("a gone pod's log directory is still there: %v", err)
	}
}

func TestGarbageCollectKeepsReadySandboxes(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	h.sync(pod)
	gone := func(types.UID) bool { return true }
	if err := h.rt.GarbageCollect(h.ctx, runtime.GCPolicy{MaxPerPodContainer: 0, MaxContainers: 0}, gone); err != nil {
		t.Fatal(err)
	}
	st := h.status(pod)
	if len(st.SandboxStatuses) != 1 || st.FindContainerStatus("c").State != runtime.ContainerStateRunning {
		t.Error("GC removed a ready sandbox or a running container")
	}
}
