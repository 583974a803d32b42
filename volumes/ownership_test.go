package volumes_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/volumes"
)

func owner(t *testing.T, p string) (gid uint32, mode os.FileMode) {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Gid, st.Mode()
}

func fsGroupPod(name string, policy *v1.PodFSGroupChangePolicy, vols ...v1.Volume) *v1.Pod {
	var mounts []v1.VolumeMount
	for _, v := range vols {
		mounts = append(mounts, mountOf(v.Name))
	}
	pod := podWith(name, vols, mounts...)
	g := int64(4321)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &g, FSGroupChangePolicy: policy}
	return pod
}

func TestFSGroupOnManagedVolumes(t *testing.T) {
	testenv.Privileged.Root(t, "changing a file's group to an arbitrary fsGroup")
	ro := &scripted{attrs: volumes.Attributes{Managed: true, ReadOnly: true}}
	fm := newHarness(t).mounter
	h := newHarness(t, volumes.NewEmptyDir(volumes.PluginConfig{Mounter: fm}), volumes.NewHostPath(), ro)
	host := t.TempDir()
	pod := fsGroupPod("fsg", nil, emptyDir("cache"), gitRepo("src"), hostPathVol("host", host, v1.HostPathDirectory))
	h.m.AddPod(pod)
	if err := h.wait(pod); err != nil {
		t.Fatal(err)
	}
	cache, _ := h.m.HostPath(pod, "cache")
	if gid, mode := owner(t, cache); gid != 4321 || mode&os.ModeSetgid == 0 || mode.Perm() != 0o777 {
		t.Fatalf("emptyDir root: gid %d mode %v; want 4321, setgid, 0777", gid, mode)
	}
	src, _ := h.m.HostPath(pod, "src")
	if gid, mode := owner(t, filepath.Join(src, "content")); gid != 4321 || mode.Perm() != 0o640 {
		t.Fatalf("read-only content: gid %d mode %v; want 4321 and 0640 (group read only)", gid, mode)
	}
	if gid, _ := owner(t, host); gid == 4321 {
		t.Fatal("a hostPath took the pod's fsGroup")
	}
}

func TestFSGroupChangePolicy(t *testing.T) {
	testenv.Privileged.Root(t, "changing a file's group to an arbitrary fsGroup")
	for _, tc := range []struct {
		policy  v1.PodFSGroupChangePolicy
		changed bool
	}{
		{v1.FSGroupChangeAlways, true},
		{v1.FSGroupChangeOnRootMismatch, false},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			h := newHarness(t)
			pod := fsGroupPod("fsg", &tc.policy, emptyDir("cache"))
			dir := volumes.VolumeDir(filepath.Join(h.podsDir, string(pod.UID)), volumes.EmptyDirPluginName, "cache")
			// An earlier run left the root right and a file wrong.
			if err := os.MkdirAll(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, -1, 4321); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777|os.ModeSetgid); err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, "f")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(f, -1, 0); err != nil {
				t.Fatal(err)
			}
			h.m.AddPod(pod)
			if err := h.wait(pod); err != nil {
				t.Fatal(err)
			}
			gid, mode := owner(t, f)
			if changed := gid == 4321 && mode.Perm() == 0o660; changed != tc.changed {
				t.Fatalf("file under the root: gid %d mode %v; changed %v, want %v", gid, mode, changed, tc.changed)
			}
		})
	}
}
