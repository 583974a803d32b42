package volumes_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/volumes"
)

// An emptyDir set up again (found on disk after a restart, its
// container still running) takes the pod's fsGroup on its own files
// only: not through a symlink a container planted, and not beneath a
// mount point.
func TestFSGroupStaysInTheVolume(t *testing.T) {
	testenv.Privileged.Root(t, "changing a file's group")
	outside, keep := outsideDir(t)
	h := newHarness(t)
	pod := fsGroupPod("fsg", nil, emptyDir("cache"))
	pod.UID = types.UID("uid-fsg")
	dir := volumes.VolumeDir(filepath.Join(h.podsDir, string(pod.UID)), volumes.EmptyDirPluginName, "cache")
	if err := os.MkdirAll(filepath.Join(dir, "own"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	bindMount(t, outside, filepath.Join(dir, "own", "host"))
	h.m.AddPod(pod)
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	if gid, _ := owner(t, filepath.Join(dir, "own")); gid != 4321 {
		t.Fatalf("the volume's own directory has group %d, want the fsGroup 4321", gid)
	}
	if gid, mode := owner(t, keep); gid != 0 || mode.Perm() != 0o600 {
		t.Fatalf("a host file reached through a bind mount in the volume: group %d mode %v, want it untouched (0, 0600)", gid, mode)
	}
	if gid, _ := owner(t, outside); gid != 0 {
		t.Fatalf("the host directory a symlink in the volume points at has group %d, want 0", gid)
	}
	if gid, _ := owner(t, filepath.Join(dir, "link")); gid != 4321 {
		t.Fatalf("the symlink itself has group %d, want 4321", gid)
	}
}

// Special files and files nobody may read take the fsGroup too.
func TestFSGroupOnSpecialFiles(t *testing.T) {
	testenv.Privileged.Root(t, "changing a file's group")
	h := newHarness(t)
	pod := fsGroupPod("special", nil, emptyDir("cache"))
	pod.UID = types.UID("uid-special")
	dir := volumes.VolumeDir(filepath.Join(h.podsDir, string(pod.UID)), volumes.EmptyDirPluginName, "cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), nil, 0o000); err != nil {
		t.Fatal(err)
	}
	h.m.AddPod(pod)
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"fifo": 0o660, "secret": 0o660} {
		if gid, mode := owner(t, filepath.Join(dir, name)); gid != 4321 || mode.Perm() != want {
			t.Errorf("%s: group %d mode %v, want 4321 and %v", name, gid, mode.Perm(), want)
		}
	}
}
