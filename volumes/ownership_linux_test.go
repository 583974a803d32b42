package volumes_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/volumes"
)

// An emptyDir set up again (found on disk after a restart, its
// container still running) takes the pod's fsGroup on its own files
// only: not through a symlink a container planted, and not beneath a
// mount point.
func TestFSGroupStaysInTheVolume(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's group needs root")
	}
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
