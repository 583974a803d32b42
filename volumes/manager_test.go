package volumes_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/mount-utils"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/volumes"
	"github.com/nodekit/nodekit/volumes/volumestest"
)

// harness is a Manager running on a fake clock and a fake mounter, over
// a real temporary pods directory.
type harness struct {
	t       *testing.T
	m       *volumes.Manager
	clock   *clocktesting.FakeClock
	mounter *mount.FakeMounter
	podsDir string

	mu     sync.Mutex
	events []string
}

func newHarness(t *testing.T, plugins ...volumes.Plugin) *harness {
	t.Helper()
	h := &harness{t: t, clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), mounter: mount.NewFakeMounter(nil), podsDir: filepath.Join(t.TempDir(), "pods")}
	if plugins == nil {
		plugins = volumes.DefaultPlugins(volumes.PluginConfig{Mounter: h.mounter})
	}
	m, err := volumes.New(volumes.Config{
		PodsDir: h.podsDir, Plugins: plugins, Mounter: h.mounter, Clock: h.clock,
		Events: func(pod *v1.Pod, typ, reason, msg string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, pod.Name+" "+typ+" "+reason+" "+msg)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

func (h *harness) eventList() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// wait calls WaitForAttachAndMount with a deadline on the real clock.
func (h *harness) wait(pod *v1.Pod) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.m.WaitForAttachAndMount(ctx, pod)
}

func (h *harness) waitUnmount(uid types.UID) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.m.WaitForUnmount(ctx, uid)
}

// eventually polls cond, stepping the fake clock by step whenever the
// reconciler waits on it, for at most 2000 rounds and 10 s.
func (h *harness) eventually(step time.Duration, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
		if cond() {
			return
		}
		if step > 0 && h.clock.HasWaiters() {
			h.clock.Step(step)
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatal("condition not met in time")
}

func podWith(name string, vols []v1.Volume, mounts ...v1.VolumeMount) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metaFor(name),
		Spec: v1.PodSpec{
			Volumes:    vols,
			Containers: []v1.Container{{Name: "c", Image: "busybox", VolumeMounts: mounts}},
		},
	}
}

func emptyDir(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
}

func hostPathVol(name, path string, typ v1.HostPathType) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &typ}}}
}

func mountOf(name string) v1.VolumeMount { return v1.VolumeMount{Name: name, MountPath: "/" + name} }

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestSetUpAndTearDown(t *testing.T) {
	h := newHarness(t)
	host := t.TempDir()
	pod := podWith("web", []v1.Volume{emptyDir("cache"), hostPathVol("host", host, v1.HostPathDirectory), emptyDir("unused")},
		mountOf("cache"), mountOf("host"))
	h.m.AddPod(pod)
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.podsDir, string(pod.UID), "volumes", "kubernetes.io~empty-dir", "cache")
	if got, err := h.m.HostPath(pod, "cache"); err != nil || got != dir {
		t.Fatalf("HostPath(cache) = %q, %v; want %q", got, err, dir)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o777 {
		t.Fatalf("emptyDir directory: %v, %v; want mode 0777", st, err)
	}
	if got, err := h.m.HostPath(pod, "host"); err != nil || got != host {
		t.Fatalf("HostPath(host) = %q, %v; want %q", got, err, host)
	}
	if _, err := h.m.HostPath(pod, "unused"); err == nil || !strings.Contains(err.Error(), `volume "unused" is not set up`) {
		t.Fatalf("HostPath(unused) error = %v; a volume no container mounts is not set up", err)
	}
	if exists(filepath.Join(h.podsDir, string(pod.UID), "volumes", "kubernetes.io~empty-dir", "unused")) {
		t.Fatal("a volume no container mounts was set up")
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !h.m.PodVolumesExist(pod.UID) {
		t.Fatal("PodVolumesExist = false while set up")
	}

	h.m.RemovePod(pod.UID)
	if err := h.waitUnmount(pod.UID); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(h.podsDir, string(pod.UID), "volumes")) {
		t.Fatal("the pod's volume directory is still there after its removal")
	}
	if !exists(host) {
		t.Fatal("the hostPath was removed with the pod")
	}
	if h.m.PodVolumesExist(pod.UID) {
		t.Fatal("PodVolumesExist = true after the teardown")
	}
	if _, err := h.m.HostPath(pod, "cache"); err == nil {
		t.Fatal("HostPath answers for a removed pod")
	}
}

func TestBadInputWaitsWithAClearErrorAndOthersGoOn(t *testing.T) {
	h := newHarness(t)
	undefined := podWith("undefined", []v1.Volume{emptyDir("cache")}, mountOf("cache"), mountOf("missing"))
	unsupported := podWith("unsupported", []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}}}, mountOf("data"))
	good := podWith("good", []v1.Volume{emptyDir("cache")}, mountOf("cache"))
	for _, p := range []*v1.Pod{undefined, unsupported, good} {
		h.m.AddPod(p)
	}
	// The valid volume of the pod with a bad mount is set up all the same.
	h.eventually(0, func() bool { _, err := h.m.HostPath(undefined, "cache"); return err == nil })
	for _, tc := range []struct {
		pod  *v1.Pod
		want string
	}{
		{undefined, `unmounted volumes=[missing], unattached volumes=[], failed to process volumes=[missing]: pod default/undefined: spec.containers[0].volumeMounts[1].name: the pod has no volume named "missing" in spec.volumes`},
		{unsupported, `unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: pod default/unsupported: spec.volumes[0] (data): no volume plugin supports its type (nfs)`},
	} {
		err := h.wait(tc.pod)
		if err == nil || err.Error() != tc.want {
			t.Errorf("WaitForAttachAndMount(%s) = %v\nwant %s", tc.pod.Name, err, tc.want)
		}
	}
	if err := h.wait(good); err != nil {
		t.Fatalf("a good pod beside bad ones: %v", err)
	}
}

func TestWaitForAttachAndMountRequiresAddPod(t *testing.T) {
	h := newHarness(t)
	pod := podWith("web", []v1.Volume{emptyDir("cache")}, mountOf("cache"))
	if err := h.wait(pod); err == nil || !strings.Contains(err.Error(), "default/web was not added") {
		t.Fatalf("WaitForAttachAndMount of an unknown pod = %v", err)
	}
}

// scripted is a plugin for "gitRepo" volumes whose SetUp fails while
// fail is above zero, blocks while hold is set, and records its calls.
type scripted struct {
	attrs volumes.Attributes

	mu       sync.Mutex
	fail     int
	hold     chan struct{}
	setUps   []volumes.Request
	tornDown []string
}

func (s *scripted) Name() string                             { return "example.com/scripted" }
func (s *scripted) CanSupport(v *v1.Volume) bool             { return v.GitRepo != nil }
func (s *scripted) Attributes(*v1.Volume) volumes.Attributes { return s.attrs }
func (s *scripted) SetUp(ctx context.Context, req *volumes.Request) (string, error) {
	s.mu.Lock()
	s.setUps = append(s.setUps, *req)
	hold := s.hold
	fail := s.fail > 0
	if fail {
		s.fail--
	}
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if fail {
		return "", errors.New("the repository is unreachable")
	}
	if err := os.MkdirAll(req.Dir, 0o750); err != nil {
		return "", err
	}
	return req.Dir, os.WriteFile(filepath.Join(req.Dir, "content"), []byte("v"), 0o600)
}
func (s *scripted) TearDown(_ context.Context, dir string) error {
	s.mu.Lock()
	s.tornDown = append(s.tornDown, dir)
	s.mu.Unlock()
	return os.RemoveAll(dir)
}
func (s *scripted) calls() []volumes.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.setUps)
}

func gitRepo(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{GitRepo: &v1.GitRepoVolumeSource{Repository: "r"}}}
}

func TestFailedSetUpIsReportedAndRetriedWithBackOff(t *testing.T) {
	s := &scripted{fail: 2}
	h := newHarness(t, s)
	pod := podWith("git", []v1.Volume{gitRepo("src")}, mountOf("src"))
	h.m.AddPod(pod)
	err := h.wait(pod)
	want := `unmounted volumes=[src], unattached volumes=[], failed to process volumes=[]: pod default/git: spec.volumes[0] (src): the repository is unreachable`
	if err == nil || err.Error() != want {
		t.Fatalf("WaitForAttachAndMount = %v\nwant %s", err, want)
	}
	h.eventually(0, func() bool { return len(h.eventList()) > 0 })
	if ev := h.eventList(); len(ev) != 1 || ev[0] != `git Warning FailedMount MountVolume.SetUp failed for volume "src" : the repository is unreachable` {
		t.Fatalf("events = %q", ev)
	}
	// No retry before the back-off (500ms) passes.
	h.clock.Step(400 * time.Millisecond)
	if n := len(s.calls()); n != 1 {
		t.Fatalf("%d SetUp calls within the back-off, want 1", n)
	}
	h.eventually(100*time.Millisecond, func() bool { return h.wait(pod) == nil })
	if n := len(s.calls()); n != 3 {
		t.Fatalf("%d SetUp calls, want 3 (two failures, one success)", n)
	}
}

func TestSlowSetUpHoldsBackOnlyItsPod(t *testing.T) {
	s := &scripted{hold: make(chan struct{})}
	h := newHarness(t, s, volumes.NewEmptyDir(volumes.PluginConfig{Mounter: mount.NewFakeMounter(nil)}))
	slow := podWith("slow", []v1.Volume{gitRepo("src")}, mountOf("src"))
	fast := podWith("fast", []v1.Volume{emptyDir("cache")}, mountOf("cache"))
	h.m.AddPod(slow)
	h.eventually(0, func() bool { return len(s.calls()) == 1 })
	h.m.AddPod(fast)
	if err := h.wait(fast); err != nil {
		t.Fatalf("a pod beside one whose SetUp hangs: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := h.m.WaitForAttachAndMount(ctx, slow); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "unmounted volumes=[src]") {
		t.Fatalf("waiting for the hung volume = %v", err)
	}
	close(s.hold)
	if err := h.wait(slow); err != nil {
		t.Fatal(err)
	}
}

func TestMountTimeout(t *testing.T) {
	s := &scripted{hold: make(chan struct{})}
	h := newHarness(t, s)
	pod := podWith("slow", []v1.Volume{gitRepo("src")}, mountOf("src"))
	h.m.AddPod(pod)
	done := make(chan error, 1)
	go func() { done <- h.wait(pod) }()
	h.eventually(0, func() bool { return h.clock.Waiters() > 0 && len(s.calls()) == 1 })
	var err error
	h.eventually(volumes.DefaultMountTimeout, func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	if err == nil || err.Error() != "unmounted volumes=[src], unattached volumes=[], failed to process volumes=[]: context deadline exceeded" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after the mount timeout: %v", err)
	}
	close(s.hold)
}

func TestRefreshVolumesAreSetUpAgain(t *testing.T) {
	s := &scripted{attrs: volumes.Attributes{Managed: true, ReadOnly: true, Refresh: true}}
	h := newHarness(t, s)
	pod := podWith("cm", []v1.Volume{gitRepo("src")}, mountOf("src"))
	h.m.AddPod(pod)
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	if c := s.calls(); len(c) != 1 || c[0].Update {
		t.Fatalf("first SetUp calls: %+v", c)
	}
	h.clock.Step(30 * time.Second)
	if n := len(s.calls()); n != 1 {
		t.Fatalf("%d SetUp calls before the sync period, want 1", n)
	}
	h.eventually(30*time.Second, func() bool { return len(s.calls()) == 2 })
	if c := s.calls(); !c[1].Update {
		t.Fatal("the refresh was not an update")
	}
	// Each wait asks for a refresh soon, without waiting for it.
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	h.eventually(0, func() bool { return len(s.calls()) == 3 })
	// A removed pod is no longer refreshed.
	h.m.RemovePod(pod.UID)
	if err := h.waitUnmount(pod.UID); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(2 * time.Minute)
	if n := len(s.calls()); n != 3 {
		t.Fatalf("%d SetUp calls after the removal, want 3", n)
	}
}

func TestVolumesOfAnEarlierRunAreAdopted(t *testing.T) {
	h := newHarness(t)
	pod := podWith("web", []v1.Volume{emptyDir("cache")}, mountOf("cache"))
	dir := volumes.VolumeDir(filepath.Join(h.podsDir, string(pod.UID)), volumes.EmptyDirPluginName, "cache")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kept"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.m.AddPod(pod)
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(dir, "kept")) {
		t.Fatal("the content of a volume set up by an earlier run was lost")
	}
}

func TestCleanupOrphans(t *testing.T) {
	h := newHarness(t)
	mk := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	orphan := filepath.Join(h.podsDir, "orphan")
	mk(filepath.Join(orphan, "volumes", "kubernetes.io~empty-dir", "cache", "f"))
	mk(filepath.Join(orphan, "containers", "c", "0a1b"))
	tmpfs := filepath.Join(orphan, "volumes", "kubernetes.io~empty-dir", "mem")
	mk(filepath.Join(tmpfs, "g"))
	if err := h.mounter.Mount("tmpfs", tmpfs, "tmpfs", nil); err != nil {
		t.Fatal(err)
	}
	unknown := filepath.Join(h.podsDir, "unknown-plugin")
	mk(filepath.Join(unknown, "volumes", "example.com~nfs", "data", "f"))
	kept := filepath.Join(h.podsDir, "kept")
	mk(filepath.Join(kept, "volumes", "kubernetes.io~empty-dir", "cache", "f"))
	live := podWith("live", []v1.Volume{emptyDir("cache")}, mountOf("cache"))
	h.m.AddPod(live)
	if err := h.wait(live); err != nil {
		t.Fatal(err)
	}

	if err := h.m.CleanupOrphans(func(uid types.UID) bool { return uid == "kept" }); err != nil {
		t.Fatal(err)
	}
	h.eventually(0, func() bool { return !exists(orphan) })
	if !slices.ContainsFunc(h.mounter.GetLog(), func(a mount.FakeAction) bool {
		return a.Action == mount.FakeActionUnmount && a.Target == tmpfs
	}) {
		t.Fatal("the orphan's tmpfs was not unmounted")
	}
	for _, p := range []string{kept, filepath.Join(unknown, "volumes", "example.com~nfs", "data", "f")} {
		if !exists(p) {
			t.Fatalf("%s was removed", p)
		}
	}
	if _, err := h.m.HostPath(live, "cache"); err != nil {
		t.Fatalf("a live pod's volume after the orphan cleanup: %v", err)
	}
	if !h.m.PodVolumesExist("unknown-plugin") {
		t.Fatal("PodVolumesExist = false for a pod whose volume no plugin can tear down")
	}
	if err := h.waitUnmount("unknown-plugin"); err == nil || !strings.Contains(err.Error(), "still holds volumes no plugin tears down") {
		t.Fatalf("WaitForUnmount of a pod whose volume no plugin knows = %v", err)
	}
}

func TestOrphanWithAMountBeneathStays(t *testing.T) {
	h := newHarness(t)
	orphan := filepath.Join(h.podsDir, "orphan")
	sub := filepath.Join(orphan, "plugins", "x", "mnt")
	if err := os.MkdirAll(sub, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := h.mounter.Mount("/dev/sdz", sub, "ext4", nil); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CleanupOrphans(func(types.UID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	h.eventually(0, func() bool {
		err := h.waitUnmount("orphan")
		return err != nil && strings.Contains(err.Error(), sub+" is still mounted")
	})
	if !exists(sub) {
		t.Fatal("a pod directory with a mount point beneath was removed")
	}
}

func TestRemovedAndAddedAgain(t *testing.T) {
	h := newHarness(t)
	pod := podWith("web", []v1.Volume{emptyDir("cache")}, mountOf("cache"))
	h.m.AddPod(pod)
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	h.m.RemovePod(pod.UID)
	h.m.AddPod(pod)
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.HostPath(pod, "cache"); err != nil {
		t.Fatal(err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  volumes.Config
		want string
	}{
		{volumes.Config{}, "volumes: Config.PodsDir is required"},
		{volumes.Config{PodsDir: "pods"}, `volumes: Config.PodsDir must be an absolute path, got "pods"`},
		{volumes.Config{PodsDir: "/p", Plugins: []volumes.Plugin{volumes.NewHostPath(), volumes.NewHostPath()}}, `volumes: Config.Plugins[1]: the name "kubernetes.io/host-path" is used twice`},
		{volumes.Config{PodsDir: "/p", Plugins: []volumes.Plugin{nil}}, `volumes: Config.Plugins[0] is nil`},
	} {
		if _, err := volumes.New(tc.cfg); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v) = %v, want %s", tc.cfg, err, tc.want)
		}
	}
}

func TestFirstSupportingPluginWins(t *testing.T) {
	s := &scripted{}
	h := newHarness(t, volumes.NewHostPath(), s)
	pod := podWith("git", []v1.Volume{gitRepo("src")}, mountOf("src"))
	h.m.AddPod(pod)
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.m.HostPath(pod, "src"); got != volumes.VolumeDir(filepath.Join(h.podsDir, string(pod.UID)), "example.com/scripted", "src") {
		t.Fatalf("HostPath = %q", got)
	}
}

func TestSetUpOfAVolumeFoundOnDiskIsAnUpdate(t *testing.T) {
	s := &scripted{}
	h := newHarness(t, s)
	fresh := podWith("fresh", []v1.Volume{gitRepo("src")}, mountOf("src"))
	old := podWith("old", []v1.Volume{gitRepo("src")}, mountOf("src"))
	if err := os.MkdirAll(volumes.VolumeDir(filepath.Join(h.podsDir, string(old.UID)), s.Name(), "src"), 0o750); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{fresh, old} {
		h.m.AddPod(p)
		if err := h.wait(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range s.calls() {
		if want := c.Pod.Name == "old"; c.Update != want {
			t.Errorf("SetUp of %s: Update %v, want %v", c.Pod.Name, c.Update, want)
		}
	}
}

func TestCleanupOrphansFindsPodsForgottenOrAddedSince(t *testing.T) {
	h := newHarness(t)
	keepNone := func(types.UID) bool { return false }
	pod := podWith("web", []v1.Volume{emptyDir("cache")}, mountOf("cache"))
	h.m.AddPod(pod)
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(h.podsDir, string(pod.UID))
	msg := filepath.Join(podDir, "containers", "c", "0a1b") // as the runtime writes it
	if err := os.MkdirAll(filepath.Dir(msg), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(msg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CleanupOrphans(keepNone); err != nil {
		t.Fatal(err)
	}
	h.m.RemovePod(pod.UID)
	if err := h.waitUnmount(pod.UID); err != nil {
		t.Fatal(err)
	}
	if !exists(msg) {
		t.Fatal("the removal of a pod's volumes took its whole directory")
	}
	// Still held by its source: kept.
	for range 3 {
		if err := h.m.CleanupOrphans(func(uid types.UID) bool { return uid == pod.UID }); err != nil {
			t.Fatal(err)
		}
	}
	if !exists(msg) {
		t.Fatal("a pod directory kept by the caller was removed")
	}
	// Dropped by its source: its directory goes.
	if err := h.m.CleanupOrphans(keepNone); err != nil {
		t.Fatal(err)
	}
	h.eventually(0, func() bool { return !exists(podDir) })

	// A pod directory that appears later is found too.
	later := filepath.Join(h.podsDir, "later", "containers")
	if err := os.MkdirAll(later, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := h.m.CleanupOrphans(keepNone); err != nil {
		t.Fatal(err)
	}
	h.eventually(0, func() bool { return !exists(filepath.Dir(later)) })
}

func TestRemovePodOfAPodOfAnEarlierRun(t *testing.T) {
	h := newHarness(t)
	podDir := filepath.Join(h.podsDir, "ended")
	f := filepath.Join(volumes.VolumeDir(podDir, volumes.EmptyDirPluginName, "cache"), "f")
	if err := os.MkdirAll(filepath.Dir(f), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !h.m.PodVolumesExist("ended") {
		t.Fatal("PodVolumesExist = false for volumes on disk")
	}
	h.m.RemovePod("ended")
	if err := h.waitUnmount("ended"); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(podDir, "volumes")) {
		t.Fatal("the volumes of a pod that ended before this run are still there")
	}
	if !exists(podDir) || h.m.PodVolumesExist("ended") {
		t.Fatal("want the pod's directory kept and no volume left")
	}
}

// A pod removed while a SetUp of its volume hangs (a getter that never
// answers) is torn down all the same: the SetUp is cancelled, no
// FailedMount is sent for the removed pod, and the teardown starts at
// once rather than after a back-off.
func TestRemovePodCancelsAHungSetUp(t *testing.T) {
	fake := volumestest.New("example.com/hang", func(v *v1.Volume) bool { return v.GitRepo != nil }, volumes.Attributes{Refresh: true})
	h := newHarness(t, fake)
	release := fake.Hold()
	defer release()
	pod := podWith("hung", []v1.Volume{gitRepo("src")}, mountOf("src"))
	h.m.AddPod(pod)
	h.eventually(0, func() bool { return len(fake.SetUps()) == 1 })
	h.m.RemovePod(pod.UID)
	if err := h.waitUnmount(pod.UID); err != nil {
		t.Fatalf("WaitForUnmount with a hung SetUp: %v", err)
	}
	if h.m.PodVolumesExist(pod.UID) {
		t.Fatal("the pod still has volumes")
	}
	if ev := h.eventList(); len(ev) != 0 {
		t.Fatalf("events for a removed pod's cancelled SetUp: %q", ev)
	}
}

// A volume whose SetUp failed is torn down at once when its pod is
// removed, and WaitForUnmount does not report the SetUp's error as the
// teardown's.
func TestRemovePodAfterAFailedSetUp(t *testing.T) {
	fake := volumestest.New("example.com/fail", func(v *v1.Volume) bool { return v.GitRepo != nil }, volumes.Attributes{})
	h := newHarness(t, fake)
	fake.Fail(errors.New("no such repository"))
	pod := podWith("failed", []v1.Volume{gitRepo("src")}, mountOf("src"))
	h.m.AddPod(pod)
	if err := h.wait(pod); err == nil || !strings.Contains(err.Error(), "no such repository") {
		t.Fatalf("WaitForAttachAndMount: %v, want the SetUp's error", err)
	}
	h.m.RemovePod(pod.UID)
	if err := h.waitUnmount(pod.UID); err != nil {
		t.Fatalf("WaitForUnmount after a failed SetUp: %v", err)
	}
}

// A pod UID or a volume name that would lead out of the pods directory
// (an embedder's pod that no podsource validated) is bad input: an error
// naming the pod and the field, and nothing made or removed outside.
func TestUIDAndVolumeNamesStayInThePodsDir(t *testing.T) {
	h := newHarness(t)
	outside := filepath.Dir(h.podsDir)
	bad := podWith("baduid", []v1.Volume{emptyDir("cache")}, mountOf("cache"))
	bad.UID = "../escape"
	h.m.AddPod(bad)
	err := h.wait(bad)
	if err == nil || !strings.Contains(err.Error(), `pod default/baduid: metadata.uid: "../escape" cannot name the pod's directory`) {
		t.Fatalf("a pod UID with '..': %v", err)
	}
	badVol := podWith("badvol", []v1.Volume{emptyDir("../../../vol"), emptyDir("ok")}, mountOf("../../../vol"), mountOf("ok"))
	h.m.AddPod(badVol)
	err = h.wait(badVol)
	if err == nil || !strings.Contains(err.Error(), `pod default/badvol: spec.volumes[0].name: "../../../vol" cannot name the volume's directory`) {
		t.Fatalf("a volume name with '..': %v", err)
	}
	h.eventually(0, func() bool { _, err := h.m.HostPath(badVol, "ok"); return err == nil })
	for _, p := range []string{filepath.Join(outside, "escape"), filepath.Join(outside, "vol"), filepath.Join(h.podsDir, "vol")} {
		if exists(p) {
			t.Errorf("%s was made outside the pod's directory", p)
		}
	}
	// Something of that name outside is left alone by a removal.
	planted := filepath.Join(outside, "escape", "volumes", "kubernetes.io~empty-dir", "x")
	if err := os.MkdirAll(planted, 0o755); err != nil {
		t.Fatal(err)
	}
	h.m.RemovePod(bad.UID)
	if err := h.waitUnmount(bad.UID); err != nil {
		t.Fatal(err)
	}
	h.m.RemovePod("../other")
	if !exists(planted) {
		t.Fatal("the removal of a pod with a bad UID removed a directory outside the pods directory")
	}
}

// A pod removed while its SetUp runs and added again at once (a static
// pod's manifest put back: the same UID) has its volume set up without a
// FailedMount for the cancelled SetUp.
func TestRemovedDuringSetUpAndAddedAgain(t *testing.T) {
	fake := volumestest.New("example.com/hang", func(v *v1.Volume) bool { return v.GitRepo != nil }, volumes.Attributes{})
	h := newHarness(t, fake)
	release := fake.Hold()
	pod := podWith("again", []v1.Volume{gitRepo("src")}, mountOf("src"))
	h.m.AddPod(pod)
	h.eventually(0, func() bool { return len(fake.SetUps()) == 1 })
	h.m.RemovePod(pod.UID)
	h.m.AddPod(pod)
	release()
	if err := h.wait(pod); err != nil {
		t.Fatalf("WaitForAttachAndMount after the pod came back: %v", err)
	}
	if ev := h.eventList(); len(ev) != 0 {
		t.Fatalf("events: %q, want none", ev)
	}
}

// With Config.Plugins nil, the default plugins run on the manager's
// clock: a content volume's generation is named from Config.Clock.
func TestDefaultPluginsUseTheManagersClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
	podsDir := filepath.Join(t.TempDir(), "pods")
	m, err := volumes.New(volumes.Config{PodsDir: podsDir, Mounter: mount.NewFakeMounter(nil), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	pod := podWith("p", []v1.Volume{{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}}}}, mountOf("info"))
	m.AddPod(pod)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := m.WaitForAttachAndMount(wctx, pod); err != nil {
		t.Fatal(err)
	}
	dir := volumes.VolumeDir(filepath.Join(podsDir, string(pod.UID)), "kubernetes.io/downward-api", "info")
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "..2031_05_06_07_08_09.") {
			return
		}
		names = append(names, e.Name())
	}
	t.Errorf("no generation named from the manager's clock (..2031_05_06_07_08_09.*) in %v", names)
}
