package cgroupfs_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodekit/nodekit/internal/cgroupfs"
	"github.com/nodekit/nodekit/internal/testenv"
)

// TestRealCgroups creates, sets, reads back and removes a uniquely named
// cgroup on the host's /sys/fs/cgroup. It needs root and writable
// cgroups and skips without them.
func TestRealCgroups(t *testing.T) {
	const mount = "/sys/fs/cgroup"
	testenv.Privileged.Root(t, "creating cgroups")
	m, err := cgroupfs.New(mount)
	if err != nil {
		testenv.Privileged.Missing(t)("no usable cgroup mount: %v", err)
	}
	buf := make([]byte, 6)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	base := "/nodekit-test-" + hex.EncodeToString(buf)
	podPath := base + "/pod1"
	t.Cleanup(func() {
		if err := m.Remove(base); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	err = m.Ensure(podPath, podResources())
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		testenv.Privileged.Missing(t)("cgroups are not writable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !m.Exists(podPath) {
		t.Fatal("Exists = false after Ensure")
	}
	r, err := m.Get(podPath)
	if err != nil {
		t.Fatal(err)
	}
	want := podResources()
	if m.Unified() {
		want.CPUShares = new(cgroupfs.CPUWeightToShares(cgroupfs.CPUSharesToWeight(*want.CPUShares)))
	}
	if d := cmp.Diff(want, r); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}
	if _, err := m.MemoryUsage(podPath); err != nil {
		t.Errorf("MemoryUsage: %v", err)
	}

	// A resize: less memory, no CPU limit, a shorter period.
	err = m.Set(podPath, cgroupfs.Resources{
		MemoryLimit: new(int64(128 << 20)),
		CPUQuota:    new(int64(-1)),
		CPUPeriod:   new(uint64(50000)),
	})
	if err != nil {
		t.Fatal(err)
	}
	want.MemoryLimit, want.CPUQuota, want.CPUPeriod = new(int64(128<<20)), new(int64(-1)), new(uint64(50000))
	if r, err = m.Get(podPath); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, r); d != "" {
		t.Errorf("Get after Set (-want +got):\n%s", d)
	}

	// A container cgroup with a task in it, as the runtime leaves one
	// (cpuset's included: it only takes the task with CPUs and memory
	// nodes copied down).
	ctr := podPath + "/ctr"
	if err := m.Ensure(ctr, cgroupfs.Resources{}); err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	dirs := []string{mount}
	if !m.Unified() {
		dirs = []string{filepath.Join(mount, "cpu"), filepath.Join(mount, "cpuset"), filepath.Join(mount, "memory")}
	}
	for _, d := range dirs {
		procs := filepath.Join(d, ctr, "cgroup.procs")
		if err := os.WriteFile(procs, []byte(strconv.Itoa(sleep.Process.Pid)), 0o644); err != nil {
			t.Fatalf("moving a task into %s: %v", procs, err)
		}
	}
	err = m.Remove(base)
	if !errors.Is(err, cgroupfs.ErrHasTasks) || !strings.Contains(err.Error(), `"`+ctr+`"`) {
		t.Fatalf("Remove with a task: got %v, want ErrHasTasks naming %s", err, ctr)
	}
	_ = sleep.Process.Kill()
	_ = sleep.Wait()

	if err := m.Remove(base); err != nil {
		t.Fatal(err)
	}
	if m.Exists(podPath) || m.Exists(base) {
		t.Error("Exists = true after Remove")
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, base)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left: %v", filepath.Join(d, base), err)
		}
	}
}
