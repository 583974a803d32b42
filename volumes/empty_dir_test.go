package volumes_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/mount-utils"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/volumes"
)

func memoryPod(sizeLimit string, limits ...string) (*v1.Pod, *v1.Volume) {
	v := v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}
	if sizeLimit != "" {
		q := resource.MustParse(sizeLimit)
		v.EmptyDir.SizeLimit = &q
	}
	pod := &v1.Pod{ObjectMeta: metaFor("mem"), Spec: v1.PodSpec{Volumes: []v1.Volume{v}}}
	for i, l := range limits {
		c := v1.Container{Name: string(rune('a' + i))}
		if l != "" {
			c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(l)}
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	return pod, &pod.Spec.Volumes[0]
}

func TestEmptyDirMemorySize(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sizeLimit string
		limits    []string
		want      []string
	}{
		{"sizeLimit only", "64Mi", []string{""}, []string{"size=67108864"}},
		{"pod limit, all containers", "", []string{"32Mi", "16Mi"}, []string{"size=50331648"}},
		{"a container without a limit", "", []string{"32Mi", ""}, nil},
		{"sizeLimit under the pod limit", "8Mi", []string{"32Mi"}, []string{"size=8388608"}},
		{"sizeLimit over the pod limit", "1Gi", []string{"32Mi"}, []string{"size=33554432"}},
		{"unsized", "", []string{""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fm := mount.NewFakeMounter(nil)
			e := volumes.NewEmptyDir(volumes.PluginConfig{Mounter: fm})
			pod, v := memoryPod(tc.sizeLimit, tc.limits...)
			dir := filepath.Join(t.TempDir(), "mem")
			got, err := e.SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: v, Dir: dir})
			if err != nil || got != dir {
				t.Fatalf("SetUp = %q, %v", got, err)
			}
			mps, _ := fm.List()
			if len(mps) != 1 || mps[0].Path != dir || mps[0].Type != "tmpfs" || !slices.Equal(mps[0].Opts, tc.want) {
				t.Fatalf("mounts = %+v, want a tmpfs on %s with options %q", mps, dir, tc.want)
			}
			// Idempotent: no second mount.
			if _, err := e.SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: v, Dir: dir, Update: true}); err != nil {
				t.Fatal(err)
			}
			if mps, _ := fm.List(); len(mps) != 1 {
				t.Fatalf("a second SetUp mounted again: %+v", mps)
			}
			if err := e.TearDown(context.Background(), dir); err != nil {
				t.Fatal(err)
			}
			if mps, _ := fm.List(); len(mps) != 0 {
				t.Fatalf("TearDown left mounts %+v", mps)
			}
			if exists(dir) {
				t.Fatal("TearDown left the directory")
			}
		})
	}
}

func TestEmptyDirOnDisk(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	e := volumes.NewEmptyDir(volumes.PluginConfig{Mounter: mount.NewFakeMounter(nil)})
	pod := podWith("web", []v1.Volume{emptyDir("cache")}, mountOf("cache"))
	dir := filepath.Join(t.TempDir(), "cache")
	if _, err := e.SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: &pod.Spec.Volumes[0], Dir: dir}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o777 {
		t.Fatalf("mode under umask 077: %v, %v; want 0777", st, err)
	}
	// TearDown does not follow a symlink out of the volume.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := e.TearDown(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if exists(dir) || !exists(filepath.Join(outside, "keep")) {
		t.Fatal("TearDown must remove the volume and nothing a symlink in it points to")
	}
	if err := e.TearDown(context.Background(), dir); err != nil {
		t.Fatalf("TearDown of a missing directory: %v", err)
	}
	bad := v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}}
	if _, err := e.SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: &bad, Dir: dir}); err == nil || err.Error() != `emptyDir medium "HugePages" is not supported` {
		t.Fatalf("HugePages: %v", err)
	}
}

// TestEmptyDirRealTmpfs mounts a real tmpfs: it needs root.
func TestEmptyDirRealTmpfs(t *testing.T) {
	testenv.Privileged.Root(t, "mounting a tmpfs (the fake mounter's tests cover the rest)")
	e := volumes.NewEmptyDir(volumes.PluginConfig{Mounter: mount.New("")})
	pod, v := memoryPod("4Mi", "")
	dir := filepath.Join(t.TempDir(), "mem")
	if _, err := e.SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: v, Dir: dir}); err != nil {
		testenv.Privileged.Missing(t)("this machine refuses a tmpfs mount (%v)", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type != unix.TMPFS_MAGIC {
		t.Fatalf("filesystem type %#x, want tmpfs", fs.Type)
	}
	if size := fs.Blocks * uint64(fs.Bsize); size != 4<<20 {
		t.Fatalf("tmpfs size %d, want 4Mi", size)
	}
	if err := e.TearDown(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if exists(dir) {
		t.Fatal("TearDown left the directory")
	}
}

// Without a mounter, a Memory emptyDir fails to set up with an error
// (it does not panic the agent), and an emptyDir on disk works.
func TestEmptyDirWithoutMounter(t *testing.T) {
	e := volumes.NewEmptyDir(volumes.PluginConfig{NoTmpfs: true})
	pod, v := memoryPod("4Mi", "")
	dir := filepath.Join(t.TempDir(), "mem")
	_, err := e.SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: v, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "memory storage requested, but no mounter") {
		t.Fatalf("a Memory emptyDir without a mounter: %v", err)
	}
	disk := v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	if _, err := e.SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: &disk, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if err := e.TearDown(context.Background(), dir); err != nil || exists(dir) {
		t.Fatalf("TearDown without a mounter: %v, left %v", err, exists(dir))
	}
}
