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

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/volumes"
)

// The secret plugin on a real tmpfs, where the host lets the test mount.
func TestSecretRealTmpfs(t *testing.T) {
	testenv.Privileged.Root(t, "mounting")
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"k": "v"}))
	p, err := volumes.NewSecret(volumes.PluginConfig{Objects: objs, Mounter: mount.New("")})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "creds"}))
	dir := filepath.Join(t.TempDir(), "creds")
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if _, err := update(p, pod, dir, false); err != nil {
		if strings.Contains(err.Error(), "mount tmpfs") {
			testenv.Privileged.Missing(t)("cannot mount here: %v", err)
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

// A PluginConfig without a Mounter means the host's mounter for every
// plugin that mounts: a Memory emptyDir and a secret both land on a real
// tmpfs.
func TestPluginConfigNilMounterIsTheHosts(t *testing.T) {
	testenv.Privileged.Root(t, "mounting")
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"k": "v"}))
	cfg := volumes.PluginConfig{Objects: objs}
	sec, err := volumes.NewSecret(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := memoryPod("4Mi", "")
	cases := []struct {
		p   volumes.Plugin
		pod *v1.Pod
	}{
		{volumes.NewEmptyDir(cfg), mem},
		{sec, testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "creds"}))},
	}
	for _, c := range cases {
		t.Run(c.p.Name(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
			if _, err := update(c.p, c.pod, dir, false); err != nil {
				if strings.Contains(err.Error(), "mount") && strings.Contains(err.Error(), "permitted") {
					testenv.Privileged.Missing(t)("cannot mount here: %v", err)
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
			if err := c.p.TearDown(context.Background(), dir); err != nil {
				t.Fatal(err)
			}
		})
	}
}
