package volumes_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodekit/nodekit/volumes"
)

// VolumeStats measures each volume of a pod under the pods directory by
// the blocks its files hold and the inodes they use, a hard link once,
// and names it after the pod's volume.
func TestVolumeStatsMeasuresThePodsVolumes(t *testing.T) {
	podsDir := t.TempDir()
	m, err := volumes.New(volumes.Config{PodsDir: podsDir})
	if err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(podsDir, "uid-1")
	scratch := volumes.VolumeDir(podDir, volumes.EmptyDirPluginName, "scratch")
	if err := os.MkdirAll(filepath.Join(scratch, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	// 3 MiB of data (not a sparse file: its blocks are allocated), and a
	// hard link to it that must not count twice.
	if err := os.WriteFile(filepath.Join(scratch, "sub", "f"), bytes.Repeat([]byte{1}, 3<<20), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(scratch, "sub", "f"), filepath.Join(scratch, "g")); err != nil {
		t.Fatal(err)
	}
	cfg := volumes.VolumeDir(podDir, "kubernetes.io/configmap", "cfg")
	if err := os.MkdirAll(cfg, 0o750); err != nil {
		t.Fatal(err)
	}

	got := m.VolumeStats("uid-1")
	if len(got) != 2 || got[0].Name != "cfg" || got[1].Name != "scratch" {
		t.Fatalf("volume stats %+v, want cfg and scratch", got)
	}
	s := got[1]
	if s.UsedBytes == nil || *s.UsedBytes < 3<<20 || *s.UsedBytes > 4<<20 {
		t.Errorf("scratch uses %v bytes, want the 3MiB file counted once", s.UsedBytes)
	}
	if s.InodesUsed == nil || *s.InodesUsed != 3 {
		t.Errorf("scratch uses %v inodes, want 3 (the volume, sub and the linked file)", s.InodesUsed)
	}
	if s.CapacityBytes == nil || *s.CapacityBytes == 0 || s.AvailableBytes == nil || s.Time.IsZero() {
		t.Errorf("scratch has no filesystem capacity, availability or time: %+v", s.FsStats)
	}
	if c := got[0]; c.UsedBytes == nil || *c.UsedBytes > 64<<10 {
		t.Errorf("the empty cfg uses %v bytes", c.UsedBytes)
	}
	if got := m.VolumeStats("uid-2"); len(got) != 0 {
		t.Errorf("a pod without volumes has stats %+v", got)
	}
}
