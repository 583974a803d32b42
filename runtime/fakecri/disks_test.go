package fakecri_test

import (
	"fmt"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/runtime/fakecri"
	"github.com/nodekit/nodekit/server"
)

const mi = 1 << 20

// fsLine prints what a filesystem's figures say, in Mi and inodes.
func fsLine(f *statsapi.FsStats) string {
	if f == nil {
		return "none"
	}
	v := func(p *uint64, unit uint64) uint64 {
		if p == nil {
			return 999999
		}
		return *p / unit
	}
	return fmt.Sprintf("cap=%d avail=%d used=%d inodes=%d free=%d iused=%d",
		v(f.CapacityBytes, mi), v(f.AvailableBytes, mi), v(f.UsedBytes, mi), v(f.Inodes, 1), v(f.InodesFree, 1), v(f.InodesUsed, 1))
}

func diskStats(t *testing.T, e *env) *fakecri.DiskStats {
	t.Helper()
	base, err := server.NewCRIStats(server.CRIStatsConfig{NodeName: "n", Runtime: e.rt, ProcDir: t.TempDir(), Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	return e.rt.DiskStats(base)
}

// On one filesystem the node's figures count the scripted other files,
// the image (4Mi, an inode), every container's writable layer (dead ones
// too) and logs; removing a dead container frees its layer. Each
// container reports its logs, each pod its ephemeral storage.
func TestDiskStatsOneFilesystem(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	e.rt.SetDisks(fakecri.Disks{Node: fakecri.Filesystem{CapacityBytes: 1000 * mi, Inodes: 1000, UsedBytes: 100 * mi, InodesUsed: 10}})
	sb, sbCfg := e.sandbox("p", false)
	e.start(sb, sbCfg, "a", fakecri.EnvRootfsBytes, "50Mi", fakecri.EnvRootfsInodes, "5", fakecri.EnvLogBytes, "20Mi", fakecri.EnvLogInodes, "2")
	dead := e.start(sb, sbCfg, "b", fakecri.EnvRootfsBytes, "30Mi", fakecri.EnvRootfsInodes, "3", fakecri.EnvExitCode, "0")
	if st := e.status(dead); st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("b is %v, want exited", st.GetState())
	}
	ds := diskStats(t, e)
	s, err := ds.Summary(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, got, want string }{
		{"node.fs", fsLine(s.Node.Fs), "cap=1000 avail=796 used=204 inodes=1000 free=979 iused=21"},
		{"imageFs", fsLine(s.Node.Runtime.ImageFs), "cap=1000 avail=796 used=84 inodes=1000 free=979 iused=9"},
		{"containerFs", fsLine(s.Node.Runtime.ContainerFs), "cap=1000 avail=796 used=84 inodes=1000 free=979 iused=9"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.what, c.got, c.want)
		}
	}
	if len(s.Pods) != 1 || len(s.Pods[0].Containers) != 1 {
		t.Fatalf("pods %+v, want p with its running container", s.Pods)
	}
	a := s.Pods[0].Containers[0]
	if got := fsLine(a.Logs); got != "cap=1000 avail=796 used=20 inodes=1000 free=979 iused=2" {
		t.Errorf("a's logs: %s", got)
	}
	if *a.Rootfs.UsedBytes != 50*mi || *a.Rootfs.InodesUsed != 5 {
		t.Errorf("a's rootfs: %s, want 50Mi and 5 inodes", fsLine(a.Rootfs))
	}
	if e := s.Pods[0].EphemeralStorage; *e.UsedBytes != 70*mi || *e.InodesUsed != 7 {
		t.Errorf("p's ephemeral storage: %s, want 70Mi and 7 inodes", fsLine(e))
	}

	if err := e.rt.RemoveContainer(e.ctx, dead); err != nil {
		t.Fatal(err)
	}
	e.rt.SetDisks(fakecri.Disks{Node: fakecri.Filesystem{CapacityBytes: 1000 * mi, Inodes: 1000, UsedBytes: 900 * mi, InodesUsed: 10}})
	if s, err = ds.Summary(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := fsLine(s.Node.Fs); got != "cap=1000 avail=26 used=974 inodes=1000 free=982 iused=18" {
		t.Errorf("node.fs after the drop and the dead container's removal: %s", got)
	}
}

// With a split image filesystem the images are on theirs, the writable
// layers on the node's, which is the container filesystem; ImageFsInfo
// reports the two apart.
func TestDiskStatsSplitImageFilesystem(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	e.rt.SetDisks(fakecri.Disks{
		Node:        fakecri.Filesystem{CapacityBytes: 1000 * mi, Inodes: 1000, UsedBytes: 100 * mi},
		Image:       &fakecri.Filesystem{CapacityBytes: 500 * mi, Inodes: 500},
		SplitLayers: true,
	})
	sb, sbCfg := e.sandbox("p", false)
	e.start(sb, sbCfg, "a", fakecri.EnvRootfsBytes, "50Mi", fakecri.EnvLogBytes, "20Mi")
	s, err := diskStats(t, e).Summary(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, got, want string }{
		{"node.fs", fsLine(s.Node.Fs), "cap=1000 avail=830 used=170 inodes=1000 free=1000 iused=0"},
		{"imageFs", fsLine(s.Node.Runtime.ImageFs), "cap=500 avail=496 used=4 inodes=500 free=499 iused=1"},
		{"containerFs", fsLine(s.Node.Runtime.ContainerFs), "cap=1000 avail=830 used=50 inodes=1000 free=1000 iused=0"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.what, c.got, c.want)
		}
	}
	info, err := e.rt.ImageFsInfo(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	img, ctr := info.GetImageFilesystems()[0], info.GetContainerFilesystems()[0]
	if img.GetFsId().GetMountpoint() == ctr.GetFsId().GetMountpoint() || img.GetUsedBytes().GetValue() != 4*mi || ctr.GetUsedBytes().GetValue() != 50*mi {
		t.Errorf("ImageFsInfo %v, want images (4Mi) and layers (50Mi) on two mount points", info)
	}
}

// Without SetDisks the node's figures are base's; containers still
// report their scripted layers and logs. A size that does not parse
// fails CreateContainer naming the variable.
func TestDiskUsageWithoutDisks(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	a := e.start(sb, sbCfg, "a", fakecri.EnvRootfsBytes, "1048576")
	if err := e.rt.SetDiskUsage(a, fakecri.DiskUsage{RootfsBytes: 2 * mi, LogBytes: 3 * mi}); err != nil {
		t.Fatal(err)
	}
	s, err := diskStats(t, e).Summary(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Pods[0].Containers[0]
	if *c.Rootfs.UsedBytes != 2*mi || *c.Logs.UsedBytes != 3*mi || c.Logs.CapacityBytes != nil {
		t.Errorf("rootfs %s logs %s, want 2Mi and 3Mi without a device", fsLine(c.Rootfs), fsLine(c.Logs))
	}
	_, err = e.rt.CreateContainer(e.ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "bad"}, Image: &runtimeapi.ImageSpec{Image: image},
		Envs: envs(fakecri.EnvLogBytes, "lots"),
	}, sbCfg)
	if err == nil || !strings.Contains(err.Error(), fakecri.EnvLogBytes) {
		t.Errorf("CreateContainer with %s=lots: %v, want an error naming it", fakecri.EnvLogBytes, err)
	}
}
