package cgroupfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodekit/nodekit/internal/cgroupfs"
)

// fakeV1 lays out a cgroup v1 mount with one directory per controller,
// as on a host whose cpu and cpuacct are mounted apart.
func fakeV1(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"cpu", "cpuacct", "memory", "pids", "cpuset"} {
		mkdir(t, filepath.Join(root, d))
	}
	write(t, filepath.Join(root, "cpuset/cpuset.cpus"), "0-3\n")
	write(t, filepath.Join(root, "cpuset/cpuset.mems"), "0\n")
	return root
}

// fakeV2 lays out a cgroup v2 mount.
func fakeV2(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	write(t, filepath.Join(root, "cgroup.subtree_control"), "\n")
	return root
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, name, value string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(value), 0o644); err != nil {
		t.Fatal(err)
	}
}

// read returns a file's content, "<missing>" if there is none.
func read(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func isDir(name string) bool {
	st, err := os.Stat(name)
	return err == nil && st.IsDir()
}

func newManager(t *testing.T, mount string) *cgroupfs.Manager {
	t.Helper()
	m, err := cgroupfs.New(mount)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// podResources are a Burstable pod's with a CPU and memory limit.
func podResources() cgroupfs.Resources {
	return cgroupfs.Resources{
		CPUShares:   new(uint64(512)),
		CPUQuota:    new(int64(50000)),
		CPUPeriod:   new(uint64(100000)),
		MemoryLimit: new(int64(256 << 20)),
		PidsLimit:   new(int64(-1)),
	}
}

const pod = "/kubepods/burstable/pod1"

func TestNew(t *testing.T) {
	joined := t.TempDir()
	for _, d := range []string{"cpu,cpuacct", "memory", "net_cls,net_prio"} {
		mkdir(t, filepath.Join(joined, d))
	}
	for _, l := range []string{"cpu", "cpuacct", "net_cls", "net_prio"} {
		target := "cpu,cpuacct"
		if strings.HasPrefix(l, "net") {
			target = "net_cls,net_prio"
		}
		if err := os.Symlink(target, filepath.Join(joined, l)); err != nil {
			t.Fatal(err)
		}
	}
	noMemory := t.TempDir()
	mkdir(t, filepath.Join(noMemory, "cpu"))

	for _, tc := range []struct {
		name    string
		mount   string
		unified bool
		wantErr string
	}{
		{name: "v1", mount: fakeV1(t)},
		{name: "v1 joined", mount: joined},
		{name: "v2", mount: fakeV2(t), unified: true},
		{name: "no memory hierarchy", mount: noMemory, wantErr: "memory hierarchy"},
		{name: "missing", mount: filepath.Join(t.TempDir(), "nothing"), wantErr: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := cgroupfs.New(tc.mount)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New: got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Unified() != tc.unified {
				t.Errorf("Unified() = %v, want %v", m.Unified(), tc.unified)
			}
		})
	}
}

func TestEnsureV1(t *testing.T) {
	root := fakeV1(t)
	m := newManager(t, root)
	if err := m.Ensure(pod, podResources()); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"cpu", "cpuacct", "memory", "pids", "cpuset"} {
		if !isDir(filepath.Join(root, h, pod)) {
			t.Errorf("no %s cgroup", h)
		}
	}
	got := map[string]string{}
	for _, f := range []string{
		"cpu/cpu.shares", "cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us",
		"memory/memory.limit_in_bytes", "pids/pids.max",
	} {
		got[f] = read(t, filepath.Join(root, filepath.Dir(f), pod, filepath.Base(f)))
	}
	want := map[string]string{
		"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "50000", "cpu/cpu.cfs_period_us": "100000",
		"memory/memory.limit_in_bytes": "268435456", "pids/pids.max": "max",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	// Every new cpuset level has the parent's CPUs and memory nodes.
	for _, dir := range []string{"kubepods", "kubepods/burstable", "kubepods/burstable/pod1"} {
		cpus := read(t, filepath.Join(root, "cpuset", dir, "cpuset.cpus"))
		mems := read(t, filepath.Join(root, "cpuset", dir, "cpuset.mems"))
		if cpus != "0-3" || mems != "0" {
			t.Errorf("cpuset %s: cpus %q mems %q, want 0-3 and 0", dir, cpus, mems)
		}
	}
	// No setting lands outside the cgroup's own controller.
	if s := read(t, filepath.Join(root, "cpuacct", pod, "cpu.shares")); s != "<missing>" {
		t.Errorf("cpuacct got cpu.shares %q", s)
	}
	if !m.Exists(pod) {
		t.Error("Exists = false after Ensure")
	}

	r, err := m.Get(pod)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(podResources(), r); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}
}

func TestEnsureJoinedHierarchy(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"cpu,cpuacct", "memory"} {
		mkdir(t, filepath.Join(root, d))
	}
	for _, l := range []string{"cpu", "cpuacct"} {
		if err := os.Symlink("cpu,cpuacct", filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	m := newManager(t, root)
	if err := m.Ensure(pod, cgroupfs.Resources{CPUShares: new(uint64(2))}); err != nil {
		t.Fatal(err)
	}
	if s := read(t, filepath.Join(root, "cpu,cpuacct", pod, "cpu.shares")); s != "2" {
		t.Errorf("cpu.shares = %q, want 2", s)
	}
	if err := m.Remove(pod); err != nil {
		t.Fatal(err)
	}
	if isDir(filepath.Join(root, "cpu,cpuacct", pod)) {
		t.Error("pod cgroup left after Remove")
	}
}

func TestEnsureV2(t *testing.T) {
	root := fakeV2(t)
	m := newManager(t, root)
	if err := m.Ensure(pod, podResources()); err != nil {
		t.Fatal(err)
	}
	// Controllers are enabled from the root down to the pod's parent,
	// not in the pod cgroup, whose children are containers.
	for _, dir := range []string{"", "kubepods", "kubepods/burstable"} {
		if s := read(t, filepath.Join(root, dir, "cgroup.subtree_control")); s != "+cpuset +cpu +io +memory +pids" {
			t.Errorf("%s/cgroup.subtree_control = %q", dir, s)
		}
	}
	if s := read(t, filepath.Join(root, pod, "cgroup.subtree_control")); s != "<missing>" {
		t.Errorf("pod cgroup.subtree_control = %q, want none", s)
	}
	got := map[string]string{}
	for _, f := range []string{"cpu.weight", "cpu.max", "memory.max", "pids.max"} {
		got[f] = read(t, filepath.Join(root, pod, f))
	}
	want := map[string]string{
		"cpu.weight": "20", // 1 + (512-2)*9999/262142
		"cpu.max":    "50000 100000",
		"memory.max": "268435456",
		"pids.max":   "max",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}

	r, err := m.Get(pod)
	if err != nil {
		t.Fatal(err)
	}
	wantR := podResources()
	wantR.CPUShares = new(cgroupfs.CPUWeightToShares(20))
	if d := cmp.Diff(wantR, r); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}

	// A second pod: the ancestors' controllers are already enabled and
	// are not written again.
	write(t, filepath.Join(root, "cgroup.subtree_control"), "cpuset cpu io memory pids")
	if err := m.Ensure("/kubepods/burstable/pod2", cgroupfs.Resources{}); err != nil {
		t.Fatal(err)
	}
	if s := read(t, filepath.Join(root, "cgroup.subtree_control")); s != "cpuset cpu io memory pids" {
		t.Errorf("root cgroup.subtree_control rewritten: %q", s)
	}
}

func TestSetV2KeepsHalfOfCPUMax(t *testing.T) {
	root := fakeV2(t)
	m := newManager(t, root)
	if err := m.Ensure(pod, podResources()); err != nil {
		t.Fatal(err)
	}
	if err := m.Set(pod, cgroupfs.Resources{CPUPeriod: new(uint64(50000))}); err != nil {
		t.Fatal(err)
	}
	if s := read(t, filepath.Join(root, pod, "cpu.max")); s != "50000 50000" {
		t.Errorf("cpu.max after a new period = %q, want 50000 50000", s)
	}
	if err := m.Set(pod, cgroupfs.Resources{CPUQuota: new(int64(-1))}); err != nil {
		t.Fatal(err)
	}
	if s := read(t, filepath.Join(root, pod, "cpu.max")); s != "max 50000" {
		t.Errorf("cpu.max after no quota = %q, want max 50000", s)
	}
}

func TestSetMemoryBelowUsage(t *testing.T) {
	for _, tc := range []struct {
		name, usage, limit, cpu, cpuValue string
		mount                             func(*testing.T) string
	}{
		{
			"v1", "memory/" + pod + "/memory.usage_in_bytes", "memory/" + pod + "/memory.limit_in_bytes",
			"cpu/" + pod + "/cpu.shares", "512", fakeV1,
		},
		{"v2", pod + "/memory.current", pod + "/memory.max", pod + "/cpu.weight", "20", fakeV2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.mount(t)
			m := newManager(t, root)
			if err := m.Ensure(pod, podResources()); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(root, tc.usage), "200000000\n")
			if got, err := m.MemoryUsage(pod); err != nil || got != 200000000 {
				t.Fatalf("MemoryUsage = %d, %v; want 200000000", got, err)
			}

			lower := podResources()
			lower.MemoryLimit = new(int64(100 << 20))
			lower.CPUShares = new(uint64(1024))
			err := m.Set(pod, lower)
			if !errors.Is(err, cgroupfs.ErrMemoryBelowUsage) {
				t.Fatalf("Set below usage: got %v, want ErrMemoryBelowUsage", err)
			}
			for _, s := range []string{pod, "104857600", "200000000"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %s", err, s)
				}
			}
			// Nothing was written: the memory limit and the CPU shares
			// are as they were.
			if s := read(t, filepath.Join(root, tc.limit)); s != "268435456" {
				t.Errorf("memory limit after a refused Set = %q, want 268435456", s)
			}
			if s := read(t, filepath.Join(root, tc.cpu)); s != tc.cpuValue {
				t.Errorf("%s after a refused Set = %q, want %s", tc.cpu, s, tc.cpuValue)
			}

			above := cgroupfs.Resources{MemoryLimit: new(int64(300 << 20))}
			if err := m.Set(pod, above); err != nil {
				t.Fatal(err)
			}
			if s := read(t, filepath.Join(root, tc.limit)); s != "314572800" {
				t.Errorf("memory limit = %q, want 314572800", s)
			}
			if err := m.Set(pod, cgroupfs.Resources{MemoryLimit: new(int64(-1))}); err != nil {
				t.Fatal(err)
			}
			if r, err := m.Get(pod); err != nil || *r.MemoryLimit != -1 {
				t.Errorf("Get after no limit: %v, %v", r.MemoryLimit, err)
			}
		})
	}
}

func TestGetUnlimited(t *testing.T) {
	root := fakeV1(t)
	m := newManager(t, root)
	if err := m.Ensure(pod, cgroupfs.Resources{}); err != nil {
		t.Fatal(err)
	}
	// What a v1 kernel shows for a cgroup nobody limited.
	write(t, filepath.Join(root, "memory", pod, "memory.limit_in_bytes"), "9223372036854771712\n")
	write(t, filepath.Join(root, "cpu", pod, "cpu.cfs_quota_us"), "-1\n")
	r, err := m.Get(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := cgroupfs.Resources{CPUQuota: new(int64(-1)), MemoryLimit: new(int64(-1))}
	if d := cmp.Diff(want, r); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}

	if _, err := m.Get("/kubepods/pod-missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a missing cgroup: got %v, want fs.ErrNotExist", err)
	}
	write(t, filepath.Join(root, "cpu", pod, "cpu.shares"), "lots\n")
	if _, err := m.Get(pod); err == nil || !strings.Contains(err.Error(), "cpu.shares") {
		t.Errorf("Get of a bad cpu.shares: got %v, want an error naming it", err)
	}
}

func TestRemove(t *testing.T) {
	for _, tc := range []struct {
		name        string
		mount       func(*testing.T) string
		hierarchies []string
	}{
		{"v1", fakeV1, []string{"cpu", "cpuacct", "memory", "pids", "cpuset"}},
		{"v2", fakeV2, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.mount(t)
			m := newManager(t, root)
			for _, p := range []string{pod, "/kubepods/burstable/pod2"} {
				if err := m.Ensure(p, podResources()); err != nil {
					t.Fatal(err)
				}
			}
			// Container cgroups the runtime left below the pod.
			for _, h := range tc.hierarchies {
				mkdir(t, filepath.Join(root, h, pod, "ctr1/sub"))
				write(t, filepath.Join(root, h, pod, "ctr1/cgroup.procs"), "")
				mkdir(t, filepath.Join(root, h, pod, "ctr2"))
			}
			// One still has a task.
			busy := filepath.Join(root, tc.hierarchies[0], pod, "ctr2/cgroup.procs")
			write(t, busy, "4242\n")
			err := m.Remove(pod)
			if !errors.Is(err, cgroupfs.ErrHasTasks) || !strings.Contains(err.Error(), `"`+pod+`/ctr2"`) {
				t.Fatalf("Remove with a task: got %v, want ErrHasTasks naming %s/ctr2", err, pod)
			}
			if !isDir(filepath.Join(root, tc.hierarchies[0], pod, "ctr2")) {
				t.Fatal("the cgroup with a task was removed")
			}

			write(t, busy, "")
			if err := m.Remove(pod); err != nil {
				t.Fatal(err)
			}
			for _, h := range tc.hierarchies {
				if isDir(filepath.Join(root, h, pod)) {
					t.Errorf("%s: pod cgroup left", h)
				}
				if !isDir(filepath.Join(root, h, "kubepods/burstable/pod2")) {
					t.Errorf("%s: the other pod's cgroup was removed", h)
				}
			}
			if m.Exists(pod) {
				t.Error("Exists = true after Remove")
			}
			if err := m.Remove(pod); err != nil {
				t.Errorf("Remove of a missing cgroup: %v", err)
			}
		})
	}
}

func TestChildren(t *testing.T) {
	root := fakeV1(t)
	m := newManager(t, root)
	for _, p := range []string{"/kubepods/burstable/podb", "/kubepods/burstable/poda", "/kubepods/besteffort/podc"} {
		if err := m.Ensure(p, cgroupfs.Resources{}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.Children("/kubepods/burstable")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"poda", "podb"}, got); d != "" {
		t.Errorf("Children (-want +got):\n%s", d)
	}
	if got, err := m.Children("/kubepods/guaranteed"); err != nil || got != nil {
		t.Errorf("Children of a missing cgroup = %v, %v; want none", got, err)
	}
}

func TestInvalidPaths(t *testing.T) {
	root := t.TempDir()
	mount := filepath.Join(root, "mount")
	for _, d := range []string{"cpu", "memory"} {
		mkdir(t, filepath.Join(mount, d))
	}
	m := newManager(t, mount)
	for _, p := range []string{"", "kubepods", "/kubepods/", "/a//b", "/a/./b", "/a/../../../x", "/..", "/../escape"} {
		t.Run(p, func(t *testing.T) {
			if err := cgroupfs.ValidatePath(p); !errors.Is(err, cgroupfs.ErrInvalid) || !strings.Contains(err.Error(), `"`+p+`"`) {
				t.Errorf("ValidatePath: got %v, want ErrInvalid naming the path", err)
			}
			for name, err := range map[string]error{
				"Ensure": m.Ensure(p, cgroupfs.Resources{CPUShares: new(uint64(2))}),
				"Set":    m.Set(p, cgroupfs.Resources{CPUShares: new(uint64(2))}),
				"Remove": m.Remove(p),
				"Get":    func() error { _, err := m.Get(p); return err }(),
				"Usage":  func() error { _, err := m.MemoryUsage(p); return err }(),
				"Child":  func() error { _, err := m.Children(p); return err }(),
			} {
				if !errors.Is(err, cgroupfs.ErrInvalid) {
					t.Errorf("%s: got %v, want ErrInvalid", name, err)
				}
			}
			if m.Exists(p) {
				t.Error("Exists = true")
			}
		})
	}
	for name, err := range map[string]error{
		"Ensure": m.Ensure("/", cgroupfs.Resources{}),
		"Set":    m.Set("/", cgroupfs.Resources{}),
		"Remove": m.Remove("/"),
	} {
		if !errors.Is(err, cgroupfs.ErrInvalid) {
			t.Errorf("%s of the root: got %v, want ErrInvalid", name, err)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) != 1 {
		t.Errorf("something was created next to the mount: %v %v", entries, err)
	}
	if !m.Exists("/") {
		t.Error("Exists(/) = false")
	}
}

func TestEnsureInvalidResources(t *testing.T) {
	root := fakeV1(t)
	m := newManager(t, root)
	for _, r := range []cgroupfs.Resources{
		{CPUQuota: new(int64(0))},
		{CPUQuota: new(int64(-2))},
		{CPUPeriod: new(uint64(0))},
		{MemoryLimit: new(int64(0))},
		{PidsLimit: new(int64(-5))},
	} {
		if err := m.Ensure(pod, r); !errors.Is(err, cgroupfs.ErrInvalid) {
			t.Errorf("Ensure(%+v): got %v, want ErrInvalid", r, err)
		}
	}
	if isDir(filepath.Join(root, "cpu/kubepods")) {
		t.Error("Ensure with invalid resources created the cgroup")
	}
}
