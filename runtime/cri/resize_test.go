package cri_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func resources(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{}
	set := func(l *v1.ResourceList, name v1.ResourceName, v string) {
		if v == "" {
			return
		}
		if *l == nil {
			*l = v1.ResourceList{}
		}
		(*l)[name] = resource.MustParse(v)
	}
	set(&r.Requests, v1.ResourceCPU, cpuReq)
	set(&r.Limits, v1.ResourceCPU, cpuLim)
	set(&r.Requests, v1.ResourceMemory, memReq)
	set(&r.Limits, v1.ResourceMemory, memLim)
	return r
}

// settings are the CPU shares, CFS quota and memory limit a container
// was last given, as the fake runtime reports them.
func settings(t *testing.T, h *harness, id string) string {
	t.Helper()
	st, err := h.fake.ContainerStatus(h.ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	l := st.GetStatus().GetResources().GetLinux()
	return strconv.FormatInt(l.GetCpuShares(), 10) + "/" + strconv.FormatInt(l.GetCpuQuota(), 10) + "/" + strconv.FormatInt(l.GetMemoryLimitInBytes(), 10)
}

// TestResizeInPlace changes a running container's requests and limits:
// the container is updated in place (no restart), with the kubelet's
// settings for them, and a sync after that has nothing to do.
func TestResizeInPlace(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Resources = resources("100m", "200m", "64Mi", "128Mi")
	h.sync(pod)
	id := h.status(pod).FindContainerStatus("app").ID.ID
	if got := settings(t, h, id); got != "102/20000/134217728" {
		t.Fatalf("created with %s, want 102/20000/134217728", got)
	}

	pod.Spec.Containers[0].Resources = resources("300m", "400m", "64Mi", "256Mi")
	res := h.sync(pod)
	if diff := cmp.Diff([]string{"ResizePodInPlace ns/p"}, steps(res)); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	st := h.status(pod).FindContainerStatus("app")
	if st.ID.ID != id || st.RestartCount != 0 {
		t.Errorf("container %s restart %d, want %s resized in place", st.ID.ID, st.RestartCount, id)
	}
	if got := settings(t, h, id); got != "307/40000/268435456" {
		t.Errorf("resized to %s, want 307/40000/268435456", got)
	}
	if res := h.sync(pod); len(res.Steps) != 0 {
		t.Errorf("a sync after the resize did %v, want nothing", steps(res))
	}
}

// TestResizeRestartPolicy: a resource whose resize policy is
// RestartContainer restarts the container with its new settings; a
// change of the other one alone resizes it in place.
func TestResizeRestartPolicy(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	c := &pod.Spec.Containers[0]
	c.Resources = resources("100m", "100m", "64Mi", "64Mi")
	c.ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	h.sync(pod)
	first := h.status(pod).FindContainerStatus("app").ID.ID

	c.Resources = resources("200m", "200m", "64Mi", "64Mi")
	if diff := cmp.Diff([]string{"ResizePodInPlace ns/p"}, steps(h.sync(pod))); diff != "" {
		t.Fatalf("cpu resize steps (-want +got):\n%s", diff)
	}
	c.Resources = resources("200m", "200m", "96Mi", "96Mi")
	if diff := cmp.Diff([]string{"KillContainer app", "StartContainer app"}, steps(h.sync(pod))); diff != "" {
		t.Fatalf("memory resize steps (-want +got):\n%s", diff)
	}
	st := h.status(pod).FindContainerStatus("app")
	if st.ID.ID == first || st.RestartCount != 1 || st.State != runtime.ContainerStateRunning {
		t.Errorf("after the memory resize: %+v, want a new running container, restart count 1", st)
	}
	if got := settings(t, h, st.ID.ID); got != "204/20000/100663296" {
		t.Errorf("restarted with %s, want 204/20000/100663296", got)
	}
	if got := h.eventsWith("Killing"); len(got) != 1 || got[0] != "Killing: Container app resize requires restart" {
		t.Errorf("Killing events %q", got)
	}
}

// TestResizeRunningInitContainer: a regular init container that runs is
// resized in place while the pod initializes.
func TestResizeRunningInitContainer(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, []string{"init"}, "app")
	pod.Spec.InitContainers[0].Resources = resources("20m", "20m", "35Mi", "35Mi")
	h.sync(pod)
	id := h.status(pod).FindContainerStatus("init").ID.ID
	pod.Spec.InitContainers[0].Resources = resources("25m", "25m", "40Mi", "40Mi")
	if diff := cmp.Diff([]string{"ResizePodInPlace ns/p"}, steps(h.sync(pod))); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	if got := settings(t, h, id); got != "25/2500/41943040" {
		t.Errorf("init container resized to %s, want 25/2500/41943040", got)
	}
}

// TestPodLevelLimitsForContainers: a container without limits of its own
// runs with the pod-level ones, and follows them when they are resized.
func TestPodLevelLimitsForContainers(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: resources("100m", "", "64Mi", "").Requests, Limits: resources("", "200m", "", "128Mi").Limits}
	h.sync(pod)
	id := h.status(pod).FindContainerStatus("app").ID.ID
	if got := settings(t, h, id); got != "204/20000/134217728" {
		t.Fatalf("created with %s, want the pod's limits: 204/20000/134217728", got)
	}
	pod.Spec.Resources.Limits = resources("", "300m", "", "256Mi").Limits
	if diff := cmp.Diff([]string{"ResizePodInPlace ns/p"}, steps(h.sync(pod))); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	if got := settings(t, h, id); got != "307/30000/268435456" {
		t.Errorf("resized to %s, want 307/30000/268435456", got)
	}
}

// fakeCgroupV1 lays out a cgroup v1 mount in a directory: one hierarchy
// per controller, as the kernel shows them.
func fakeCgroupV1(t *testing.T) string {
	t.Helper()
	mount := t.TempDir()
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "cpuset"} {
		if err := os.MkdirAll(filepath.Join(mount, c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, v := range map[string]string{"cpuset/cpuset.cpus": "0-1", "cpuset/cpuset.mems": "0"} {
		if err := os.WriteFile(filepath.Join(mount, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return mount
}

func readCgroup(t *testing.T, mount, path string) string {
	t.Helper()
	var out []string
	for _, f := range []string{"cpu/" + path + "/cpu.shares", "cpu/" + path + "/cpu.cfs_quota_us", "memory/" + path + "/memory.limit_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(mount, f))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimSpace(string(b)))
	}
	return strings.Join(out, "/")
}

// TestPodCgroup: with a CgroupRoot the pod gets its cgroup before its
// sandbox, with the kubelet's settings; a resize changes it, and one that
// would lower its memory limit below its usage fails with the kubelet's
// message and changes nothing; the kill removes it.
func TestPodCgroup(t *testing.T) {
	mount := fakeCgroupV1(t)
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.CgroupRoot, c.CgroupMount = "/kubepods", mount })
	pod := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	pod.Spec.Containers[0].Resources = resources("100m", "200m", "64Mi", "128Mi")
	pod.Spec.Containers[1].Resources = resources("50m", "100m", "32Mi", "64Mi")
	withEnv(&pod.Spec.Containers[0], "FAKECRI_MEMORY_BYTES", "20971520")
	h.sync(pod)
	path := "/kubepods/burstable/pod" + string(pod.UID)
	if got, want := readCgroup(t, mount, path), "153/30000/201326592"; got != want {
		t.Fatalf("pod cgroup %s, want %s", got, want)
	}
	if sb := h.rec.sandboxes[0]; sb.GetLinux().GetCgroupParent() != path {
		t.Errorf("sandbox cgroup parent %q, want %q", sb.GetLinux().GetCgroupParent(), path)
	}

	pod.Spec.Containers[0].Resources = resources("200m", "400m", "64Mi", "256Mi")
	if diff := cmp.Diff([]string{"ResizePodInPlace ns/p"}, steps(h.sync(pod))); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	if got, want := readCgroup(t, mount, path), "256/50000/335544320"; got != want {
		t.Errorf("resized pod cgroup %s, want %s", got, want)
	}

	if err := os.WriteFile(filepath.Join(mount, "memory", path, "memory.usage_in_bytes"), []byte("100000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod.Spec.Containers[0].Resources = resources("200m", "400m", "10Mi", "10Mi")
	res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
	if len(res.Steps) != 1 || res.Steps[0].Action != runtime.ActionResize || res.Steps[0].Err == nil {
		t.Fatalf("steps %+v, want one failed resize", res.Steps)
	}
	want := `cannot decrease memory limits: [attempting to set pod memory limit (77594624) below current usage (100000000), attempting to set container "a" memory limit (10485760) below current usage (20971520)]`
	if s := res.Steps[0]; s.Reason != cri.ReasonResizeError || s.Message != want {
		t.Errorf("resize failed with %q %q, want %q %q", s.Reason, s.Message, cri.ReasonResizeError, want)
	}
	if got, want := readCgroup(t, mount, path), "256/50000/335544320"; got != want {
		t.Errorf("pod cgroup after the failed resize %s, want it unchanged, %s", got, want)
	}
	if r, ok := h.rt.PodCgroupResources(pod.UID); !ok || r.CPURequest.String() != "250m" || r.CPULimit.String() != "500m" || r.MemoryLimit.String() != "320Mi" {
		t.Errorf("PodCgroupResources = %+v, %v; want 250m, 500m and 320Mi", r, ok)
	}

	if err := h.rt.KillPod(h.ctx, pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mount, "cpu", path)); !os.IsNotExist(err) {
		t.Errorf("pod cgroup after the kill: %v, want it gone", err)
	}
}

// TestResizeMemoryRequestAlone: a change of the memory request alone,
// which no cgroup setting shows, is a resize as the kubelet sees it: in
// place (the status then reports the new request), or a restart under
// a RestartContainer memory policy.
func TestResizeMemoryRequestAlone(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app", "strict")
	pod.Spec.Containers[0].Resources = resources("100m", "200m", "64Mi", "128Mi")
	pod.Spec.Containers[1].Resources = resources("100m", "200m", "64Mi", "128Mi")
	pod.Spec.Containers[1].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	h.sync(pod)
	if h.rt.ResizeInProgress(pod, h.status(pod)) {
		t.Error("a pod as created is in progress of a resize")
	}
	pod.Spec.Containers[0].Resources = resources("100m", "200m", "96Mi", "128Mi")
	pod.Spec.Containers[1].Resources = resources("100m", "200m", "96Mi", "128Mi")
	before := h.status(pod)
	if !h.rt.ResizeInProgress(pod, before) {
		t.Error("a pod whose memory requests changed is not in progress of a resize")
	}
	if diff := cmp.Diff([]string{"KillContainer strict", "ResizePodInPlace ns/p", "StartContainer strict"}, steps(h.sync(pod))); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	st := h.status(pod)
	if c := st.FindContainerStatus("app"); c.RestartCount != 0 || c.Resources == nil || c.Resources.MemoryRequest == nil || c.Resources.MemoryRequest.String() != "96Mi" {
		t.Errorf("app: restarts %d resources %+v, want resized in place to a 96Mi request", c.RestartCount, c.Resources)
	}
	if c := st.FindContainerStatus("strict"); c.RestartCount != 1 {
		t.Errorf("strict: restarts %d, want 1", c.RestartCount)
	}
	if !h.rt.ResizeInProgress(pod, before) {
		t.Error("the observation from before the sync no longer shows the resize in progress")
	}
	if h.rt.ResizeInProgress(pod, st) {
		t.Error("the observation after the sync still shows the resize in progress")
	}
}

// TestPodCgroupGarbageCollected: the collection removes the cgroup of a
// pod that is gone and has no sandbox left (left by an agent that
// stopped before it killed the pod), and no other: not of a pod still
// wanted, not of one whose sandbox is still there, and nothing for a
// name that is not a pod UID.
func TestPodCgroupGarbageCollected(t *testing.T) {
	mount := fakeCgroupV1(t)
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.CgroupRoot, c.CgroupMount = "/kubepods", mount })
	gone := testPod(v1.RestartPolicyAlways, nil, "app")
	gone.UID, gone.Name = "gone", "gone"
	kept := testPod(v1.RestartPolicyAlways, nil, "app")
	kept.UID, kept.Name = "kept", "kept"
	h.sync(gone)
	h.sync(kept)
	// gone's sandbox disappears without a KillPod.
	sbs, err := h.fake.ListPodSandbox(h.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.GetMetadata().GetUid() == "gone" {
			_ = h.fake.StopPodSandbox(h.ctx, sb.GetId())
			if err := h.fake.RemovePodSandbox(h.ctx, sb.GetId()); err != nil {
				t.Fatal(err)
			}
		}
	}
	exists := func(uid string) bool {
		_, err := os.Stat(filepath.Join(mount, "cpu/kubepods/besteffort/pod"+uid))
		return err == nil
	}
	// Wanted pods are kept whatever runs.
	if err := h.rt.GarbageCollect(h.ctx, runtime.GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1}, func(types.UID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if !exists("gone") || !exists("kept") {
		t.Fatal("the collection removed the cgroup of a pod still wanted")
	}
	// kept is gone too, but its sandbox is still there.
	if err := h.rt.GarbageCollect(h.ctx, runtime.GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1}, func(types.UID) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if exists("gone") || !exists("kept") {
		t.Errorf("after the collection: gone's cgroup %v (want removed), kept's %v (want kept: its sandbox is there)", exists("gone"), exists("kept"))
	}
}

// podLimitAtUpdate records, at each UpdateContainerResources, the pod
// cgroup's memory limit as it is at that moment.
type podLimitAtUpdate struct {
	criapi.RuntimeService
	file string
	seen []string
}

func (p *podLimitAtUpdate) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.ContainerResources) error {
	b, _ := os.ReadFile(p.file)
	p.seen = append(p.seen, strings.TrimSpace(string(b)))
	return p.RuntimeService.UpdateContainerResources(ctx, id, res)
}

// TestPodCgroupOrder: as the kubelet, a raised limit is raised on the pod
// cgroup before its containers, and a lowered one lowered on the pod
// cgroup after them, so a container's limit never exceeds its pod's.
func TestPodCgroupOrder(t *testing.T) {
	mount := fakeCgroupV1(t)
	var rec *podLimitAtUpdate
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	path := "/kubepods/pod" + string(pod.UID)
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
		c.CgroupRoot, c.CgroupMount = "/kubepods", mount
		rec = &podLimitAtUpdate{RuntimeService: c.RuntimeService, file: filepath.Join(mount, "memory", path, "memory.limit_in_bytes")}
		c.RuntimeService = rec
	})
	pod.Spec.Containers[0].Resources = resources("100m", "100m", "128Mi", "128Mi")
	h.sync(pod)
	if err := os.WriteFile(filepath.Join(mount, "memory", path, "memory.usage_in_bytes"), []byte("1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod.Spec.Containers[0].Resources = resources("100m", "100m", "256Mi", "256Mi")
	h.sync(pod)
	pod.Spec.Containers[0].Resources = resources("100m", "100m", "64Mi", "64Mi")
	h.sync(pod)
	// 256Mi when the container was raised to it; still 256Mi when it was
	// lowered to 64Mi.
	if want := []string{"268435456", "268435456"}; !slices.Equal(rec.seen, want) {
		t.Errorf("the pod cgroup's memory limit at each container update: %v, want %v", rec.seen, want)
	}
	if got, want := readCgroup(t, mount, path), "102/10000/67108864"; got != want {
		t.Errorf("pod cgroup at the end %s, want %s", got, want)
	}
}
