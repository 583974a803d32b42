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

// bindMount bind-mounts src on dst (made if missing) for the test, or
// skips it where the host refuses.
func bindMount(t *testing.T, src, dst string) {
	t.Helper()
	testenv.Privileged.Root(t, "a bind mount")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		testenv.Privileged.Missing(t)("this machine refuses a bind mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
}

// outsideDir is a host directory holding the file "keep", of group 0.
func outsideDir(t *testing.T) (dir, keep string) {
	t.Helper()
	dir = t.TempDir()
	keep = filepath.Join(dir, "keep")
	if err := os.WriteFile(keep, []byte("host data"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, keep
}

// A bind mount of a host directory beneath an emptyDir (one a container
// with Bidirectional propagation, or an administrator, left there) is
// not emptied by the teardown: the host's files stay, and the teardown
// fails naming the mount point.
func TestEmptyDirTearDownCrossesNoMountPoint(t *testing.T) {
	outside, keep := outsideDir(t)
	e := volumes.NewEmptyDir(volumes.PluginConfig{Mounter: mount.New("")})
	dir := filepath.Join(t.TempDir(), "cache")
	pod := testPod(emptyDir("cache"))
	if _, err := e.SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: &pod.Spec.Volumes[0], Dir: dir}); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(dir, "sub", "host")
	bindMount(t, outside, mnt)
	if err := os.WriteFile(filepath.Join(dir, "sub", "own"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := e.TearDown(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), mnt+" is a mount point") {
		t.Fatalf("TearDown over a mount point: %v, want an error naming %s", err, mnt)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "host data" {
		t.Fatalf("the host file under the bind mount: %q, %v; want it kept", b, err)
	}
	if exists(filepath.Join(dir, "sub", "own")) {
		t.Fatal("the volume's own files beside the mount point were not removed")
	}
	// Once the mount is gone, the teardown completes.
	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.TearDown(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if exists(dir) || !exists(keep) {
		t.Fatalf("after the unmount: volume left %v, host file kept %v", exists(dir), exists(keep))
	}
}

// The same holds for content volumes and for the directory of an
// orphaned pod.
func TestContentTearDownCrossesNoMountPoint(t *testing.T) {
	outside, keep := outsideDir(t)
	p := configMapPlugin(t, objectsWith(cm("cfg", map[string]string{"k": "v"})))
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}))
	dir := mustSetUp(t, p, pod)
	bindMount(t, outside, filepath.Join(dir, "planted"))
	err := p.TearDown(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "is a mount point") {
		t.Fatalf("TearDown over a mount point: %v", err)
	}
	if !exists(keep) {
		t.Fatal("the configMap teardown removed a host file through a bind mount")
	}
}

// A host directory bind-mounted on the volume directory itself (the
// same file system, so no device tells it apart) is not emptied by the
// teardown of a plugin that mounts nothing there itself (configMap) or
// has no mounter.
func TestTearDownOfABindMountedVolumeDir(t *testing.T) {
	objs := objectsWith(cm("cfg", map[string]string{"k": "v"}))
	plugins := map[string]volumes.Plugin{"configMap": configMapPlugin(t, objs), "emptyDir without a mounter": volumes.NewEmptyDir(volumes.PluginConfig{NoTmpfs: true})}
	for name, p := range plugins {
		t.Run(name, func(t *testing.T) {
			outside, keep := outsideDir(t)
			dir := filepath.Join(t.TempDir(), "vol")
			bindMount(t, outside, dir)
			err := p.TearDown(context.Background(), dir)
			if err == nil || !strings.Contains(err.Error(), dir+" is a mount point") {
				t.Errorf("TearDown of a bind-mounted volume directory: %v, want an error naming it", err)
			}
			if !exists(keep) {
				t.Error("the teardown removed the host's file through a bind mount on the volume directory")
			}
		})
	}
}
