package volumes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	mount "k8s.io/mount-utils"

	"github.com/nodekit/nodekit/volumes"
)

// The secret plugin on a real tmpfs, where the host lets the test mount.
func TestSecretRealTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"k": "v"}))
	p, err := volumes.NewSecret(objs, mount.New(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "creds"}))
	dir := filepath.Join(t.TempDir(), "creds")
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if _, err := update(p, pod, dir, false); err != nil {
		if strings.Contains(err.Error(), "mount tmpfs") {
			t.Skipf("cannot mount here: %v", err)
		}
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		t.Errorf("%s is on file system type %#x, want tmpfs", dir, st.Type)
	}
	if m := modeOf(t, dir); m != 0o755 {
		t.Errorf("tmpfs root mode %#o, want 0755", m)
	}
	checkContent(t, dir, map[string]string{"k": "v"})
	// Set up again: not mounted twice.
	if _, err := update(p, pod, dir, true); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), " "+dir+" "); n != 1 {
		t.Errorf("%s mounted %d times, want once", dir, n)
	}
	if err := p.TearDown(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("after TearDown: %v, want the directory gone", err)
	}
}
