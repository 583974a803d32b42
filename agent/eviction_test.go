package agent_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/volumes"
)

// lowMemory is a node where the pod "hog" uses 300Mi, with 50Mi of
// memory left once low is set (1Gi before).
type lowMemory struct{ low atomic.Bool }

func (l *lowMemory) Summary(context.Context) (*statsapi.Summary, error) {
	u := func(v uint64) *uint64 { return &v }
	avail := uint64(1 << 30)
	if l.low.Load() {
		avail = 50 << 20
	}
	return &statsapi.Summary{
		Node: statsapi.NodeStats{Memory: &statsapi.MemoryStats{AvailableBytes: u(avail), WorkingSetBytes: u(900 << 20)}},
		Pods: []statsapi.PodStats{{
			PodRef:     statsapi.PodReference{Name: "hog", Namespace: "default", UID: "hog-uid"},
			Memory:     &statsapi.MemoryStats{WorkingSetBytes: u(300 << 20)},
			Containers: []statsapi.ContainerStats{{Name: "main", Memory: &statsapi.MemoryStats{WorkingSetBytes: u(300 << 20)}}},
		}},
	}, nil
}

// Under memory pressure the agent evicts the running pod: its
// containers stop and it ends Failed with reason Evicted and the
// kubelet's message; the node reports MemoryPressure, and a BestEffort
// pod added then is refused.
func TestMemoryPressureEvictsThroughTheAgent(t *testing.T) {
	fake := newFake(t)
	dir := t.TempDir()
	events := &eventLog{}
	stats := &lowMemory{}
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI:      cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Server:   agent.ServerConfig{Stats: stats},
		Eviction: &agent.EvictionConfig{MonitoringInterval: 50 * time.Millisecond},
		Events:   events.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	f.send(podsource.SET)
	f.send(podsource.ADD, apiPod("hog", v1.RestartPolicyAlways, []string{"main"}))
	f.waitFor("hog", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	if mem, _, _ := a.Pressure(); mem {
		t.Fatalf("memory pressure reported with 1Gi free")
	}
	stats.low.Store(true)
	got := f.waitFor("hog", "evicted and stopped", func(s v1.PodStatus) bool {
		return s.Phase == v1.PodFailed && len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Terminated != nil
	})
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container main was using 300Mi, request is 0, has larger consumption of memory. "
	if got.Reason != "Evicted" || got.Message != want {
		t.Errorf("hog: reason %q message %q, want Evicted %q", got.Reason, got.Message, want)
	}
	checkDisruptionTarget(t, "hog", got, want)
	if !events.has("Evicted: " + want) {
		t.Errorf("no Evicted event: %v", events.list)
	}
	if mem, _, _ := a.Pressure(); !mem {
		t.Errorf("no memory pressure reported")
	}
	f.send(podsource.ADD, apiPod("late", v1.RestartPolicyAlways, []string{"main"}))
	late := f.waitFor("late", "refused", func(s v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	if late.Reason != "Evicted" || !strings.HasPrefix(late.Message, "Pod was rejected: The node had condition: [MemoryPressure]. ") {
		t.Errorf("late: %q %q", late.Reason, late.Message)
	}
}

// fullDisk is a node where the container "main" of the pod "filler"
// writes 10Mi to its writable layer, 150Mi once full is set.
type fullDisk struct{ full atomic.Bool }

func (d *fullDisk) Summary(context.Context) (*statsapi.Summary, error) {
	u := func(v uint64) *uint64 { return &v }
	used := uint64(10 << 20)
	if d.full.Load() {
		used = 150 << 20
	}
	return &statsapi.Summary{Pods: []statsapi.PodStats{{
		PodRef:           statsapi.PodReference{Name: "filler", Namespace: "default", UID: "filler-uid"},
		EphemeralStorage: &statsapi.FsStats{UsedBytes: u(used)},
		Containers:       []statsapi.ContainerStats{{Name: "main", Rootfs: &statsapi.FsStats{UsedBytes: u(used)}}},
	}}}, nil
}

// A pod writing past its ephemeral-storage limit is evicted by the
// agent, with no threshold configured: its containers stop and it ends
// Failed with reason Evicted and the kubelet's message.
func TestEphemeralStorageLimitEvictsThroughTheAgent(t *testing.T) {
	fake := newFake(t)
	dir := t.TempDir()
	events := &eventLog{}
	stats := &fullDisk{}
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI:      cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Server:   agent.ServerConfig{Stats: stats},
		Eviction: &agent.EvictionConfig{MonitoringInterval: 50 * time.Millisecond, Thresholds: []eviction.Threshold{}},
		Events:   events.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	f.send(podsource.SET)
	pod := apiPod("filler", v1.RestartPolicyAlways, []string{"main"})
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("100Mi")}
	f.send(podsource.ADD, pod)
	f.waitFor("filler", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	stats.full.Store(true)
	got := f.waitFor("filler", "evicted and stopped", func(s v1.PodStatus) bool {
		return s.Phase == v1.PodFailed && len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Terminated != nil
	})
	const want = "Pod ephemeral local storage usage exceeds the total limit of containers 100Mi. "
	if got.Reason != "Evicted" || got.Message != want {
		t.Errorf("filler: reason %q message %q, want Evicted %q", got.Reason, got.Message, want)
	}
	for _, c := range got.Conditions {
		if c.Type == v1.DisruptionTarget {
			t.Errorf("filler: DisruptionTarget %+v after a local storage limit eviction; the kubelet adds none", c)
		}
	}
	if !events.has("Evicted: " + want) {
		t.Errorf("no Evicted event: %v", events.list)
	}
}

// checkDisruptionTarget checks that s has the kubelet's DisruptionTarget
// condition with the message.
func checkDisruptionTarget(t *testing.T, name string, s v1.PodStatus, message string) {
	t.Helper()
	for _, c := range s.Conditions {
		if c.Type != v1.DisruptionTarget {
			continue
		}
		if c.Status != v1.ConditionTrue || c.Reason != "TerminationByKubelet" || c.Message != message || c.LastTransitionTime.IsZero() {
			t.Errorf("%s: DisruptionTarget %+v, want True, TerminationByKubelet, %q and a transition time", name, c, message)
		}
		return
	}
	t.Errorf("%s: no DisruptionTarget condition in %+v", name, s.Conditions)
}

// tightAllocatable is a node with plenty of free memory where the pod
// "hog" uses 10Mi of working set, 950Mi once grown is set.
type tightAllocatable struct{ grown atomic.Bool }

func (ta *tightAllocatable) Summary(context.Context) (*statsapi.Summary, error) {
	u := func(v uint64) *uint64 { return &v }
	ws := uint64(10 << 20)
	if ta.grown.Load() {
		ws = 950 << 20
	}
	return &statsapi.Summary{
		Node: statsapi.NodeStats{Memory: &statsapi.MemoryStats{AvailableBytes: u(8 << 30), WorkingSetBytes: u(2 << 30)}},
		Pods: []statsapi.PodStats{{
			PodRef:     statsapi.PodReference{Name: "hog", Namespace: "default", UID: "hog-uid"},
			Memory:     &statsapi.MemoryStats{WorkingSetBytes: u(ws)},
			Containers: []statsapi.ContainerStats{{Name: "main", Memory: &statsapi.MemoryStats{WorkingSetBytes: u(ws)}}},
		}},
	}, nil
}

// With the default thresholds, a pod that leaves less than 100Mi of the
// node's allocatable memory is evicted (allocatableMemory.available),
// though the node has memory to spare.
func TestAllocatableMemoryEvictsThroughTheAgent(t *testing.T) {
	fake := newFake(t)
	dir := t.TempDir()
	stats := &tightAllocatable{}
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI:         cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Allocatable: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
		Server:      agent.ServerConfig{Stats: stats},
		Eviction:    &agent.EvictionConfig{MonitoringInterval: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	f.send(podsource.SET)
	f.send(podsource.ADD, apiPod("hog", v1.RestartPolicyAlways, []string{"main"}))
	f.waitFor("hog", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	stats.grown.Store(true)
	got := f.waitFor("hog", "evicted", func(s v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 74Mi. Container main was using 950Mi, request is 0, has larger consumption of memory. "
	if got.Reason != "Evicted" || got.Message != want {
		t.Errorf("hog: reason %q message %q, want Evicted %q", got.Reason, got.Message, want)
	}
}

// On fakecri with scripted disks, a drop of the node filesystem's free
// space below nodefs.available<100Mi makes the agent reclaim at node
// level first (the dead container of a finished pod, an unused image)
// and, that not being enough, evict the pod whose writable layer and
// logs take the most, with the kubelet's message, end to end through
// server.CRIStats and fakecri.DiskStats.
func TestDiskPressureOnFakecri(t *testing.T) {
	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.88.0.0/16", Images: []string{"nodekit.test/unused:1"}})
	if err != nil {
		t.Fatal(err)
	}
	disks := func(otherMi uint64) fakecri.Disks {
		return fakecri.Disks{Node: fakecri.Filesystem{CapacityBytes: 1000 << 20, Inodes: 1e6, UsedBytes: otherMi << 20}}
	}
	fake.SetDisks(disks(500))
	base, err := server.NewCRIStats(server.CRIStatsConfig{NodeName: "node", Runtime: fake, ProcDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var reclaimedImages atomic.Int32
	reclaimImages := func(ctx context.Context) error {
		reclaimedImages.Add(1)
		return fake.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "nodekit.test/unused:1"})
	}
	dir := t.TempDir()
	events := &eventLog{}
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI:    cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Server: agent.ServerConfig{Stats: fake.DiskStats(base)},
		Eviction: &agent.EvictionConfig{
			MonitoringInterval: 50 * time.Millisecond, ReclaimImages: reclaimImages,
			Thresholds: []eviction.Threshold{{Signal: eviction.SignalNodeFsAvailable, Value: eviction.Value{Quantity: ptr(resource.MustParse("100Mi"))}}},
		},
		Events: events.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	f.send(podsource.SET)
	f.send(podsource.ADD,
		apiPod("job", v1.RestartPolicyNever, []string{"main"}, fakecri.EnvExitCode, "0", fakecri.EnvRootfsBytes, "30Mi"),
		apiPod("writer", v1.RestartPolicyAlways, []string{"main"}, fakecri.EnvRootfsBytes, "50Mi", fakecri.EnvLogBytes, "30Mi"),
		apiPod("quiet", v1.RestartPolicyAlways, []string{"main"}, fakecri.EnvRootfsBytes, "1Mi"))
	f.waitFor("job", "succeeded", func(s v1.PodStatus) bool { return s.Phase == v1.PodSucceeded })
	f.waitFor("writer", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	f.waitFor("quiet", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	if _, disk, _ := a.Pressure(); disk {
		t.Fatalf("disk pressure with 381Mi free")
	}
	jobContainers := func() int {
		cs, err := fake.ListContainers(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range cs {
			if c.GetLabels()["io.kubernetes.pod.name"] == "job" {
				n++
			}
		}
		return n
	}
	if n := jobContainers(); n != 1 {
		t.Fatalf("the finished job has %d containers, want its dead one", n)
	}

	// 320Mi more of other files: 61Mi free. Removing the job's container
	// (30Mi) and the unused image (4Mi) leaves 95Mi: writer must go.
	fake.SetDisks(disks(820))
	got := f.waitFor("writer", "evicted", func(s v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	want := "The node was low on resource: ephemeral-storage. Threshold quantity: 100Mi, available: 61Mi. Container main was using 80Mi, request is 0, has larger consumption of ephemeral-storage. "
	if got.Reason != "Evicted" || got.Message != want {
		t.Errorf("writer: reason %q message %q, want Evicted %q", got.Reason, got.Message, want)
	}
	checkDisruptionTarget(t, "writer", got, want)
	if n := jobContainers(); n != 0 {
		t.Errorf("the job's dead container is still there: no node-level reclaim before the eviction")
	}
	if reclaimedImages.Load() == 0 {
		t.Errorf("unused images were not reclaimed before the eviction")
	}
	if _, disk, _ := a.Pressure(); !disk {
		t.Errorf("no disk pressure reported")
	}
	if !events.has("Evicted: " + want) {
		t.Errorf("no Evicted event: %v", events.list)
	}
	if s, _ := f.history.last("quiet"); s.Phase != v1.PodRunning {
		t.Errorf("quiet is %s, want Running: one eviction per pass, the largest user first", s.Phase)
	}
}

// A pod that writes past its emptyDir's sizeLimit is evicted by the
// agent with its default stats (server.CRIStats over the runtime): the
// volume manager measures the volume on disk, so the eviction manager
// sees its usage, and the pod ends Failed with reason Evicted and the
// kubelet's message naming the volume and its limit.
func TestEmptyDirSizeLimitEvictsThroughTheAgent(t *testing.T) {
	fake := newFake(t)
	dir := t.TempDir()
	podsDir := filepath.Join(dir, "pods")
	events := &eventLog{}
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI:      cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: podsDir, ResolvConf: "-"},
		Eviction: &agent.EvictionConfig{MonitoringInterval: 50 * time.Millisecond, Thresholds: []eviction.Threshold{}},
		Events:   events.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	f.send(podsource.SET)
	pod := apiPod("filler", v1.RestartPolicyAlways, []string{"main"})
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("1Mi"))}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	f.send(podsource.ADD, pod)
	f.waitFor("filler", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	// What the container would write into the volume.
	scratch := volumes.VolumeDir(filepath.Join(podsDir, string(pod.UID)), volumes.EmptyDirPluginName, "scratch")
	if err := os.WriteFile(filepath.Join(scratch, "f"), bytes.Repeat([]byte{1}, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	got := f.waitFor("filler", "evicted and stopped", func(s v1.PodStatus) bool {
		return s.Phase == v1.PodFailed && len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Terminated != nil
	})
	const want = `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `
	if got.Reason != "Evicted" || got.Message != want {
		t.Errorf("filler: reason %q message %q, want Evicted %q", got.Reason, got.Message, want)
	}
	if !events.has("Evicted: " + want) {
		t.Errorf("no Evicted event: %v", events.list)
	}
}
