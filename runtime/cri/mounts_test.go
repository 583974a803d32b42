package cri_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func TestRejectedSubPathCreatesNothingOutsideTheVolume(t *testing.T) {
	root := t.TempDir()
	data, outside := filepath.Join(root, "data"), filepath.Join(root, "outside")
	for _, d := range []string{data, outside, filepath.Join(data, "real")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"abs":      outside,
		"rel":      "../outside",
		"dangling": filepath.Join(outside, "new"),
		"inside":   "real",
	} {
		if err := os.Symlink(target, filepath.Join(data, name)); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.Volumes = volumeDirs{"data": data} })
	for i, tc := range []struct {
		sub  string
		want string // host path under data, or "" for a refusal
	}{
		{sub: "abs/made/deeper"},
		{sub: "rel/made"},
		{sub: "dangling"},
		{sub: "dangling/made"},
		{sub: "inside/made", want: "real/made"},
	} {
		pod := testPod(v1.RestartPolicyAlways, nil, "app")
		pod.Name, pod.UID = strings.ReplaceAll(tc.sub, "/", "-"), types.UID("uid-"+string(rune('a'+i)))
		pod.Spec.Volumes = []v1.Volume{{Name: "data"}}
		pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: tc.sub}}
		s := lastStep(h.rt.SyncPod(h.ctx, pod, h.status(pod)), "app")
		if tc.want == "" {
			if s == nil || s.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(s.Message, "resolves outside its volume") {
				t.Errorf("%s: step %+v, want CreateContainerConfigError: resolves outside its volume", tc.sub, s)
			}
		} else {
			if s == nil || s.Err != nil {
				t.Fatalf("%s: step %+v", tc.sub, s)
			}
			if got := h.rec.config("app").GetMounts()[0].GetHostPath(); got != filepath.Join(data, tc.want) {
				t.Errorf("%s: host path %q, want %q", tc.sub, got, filepath.Join(data, tc.want))
			}
		}
		entries, err := os.ReadDir(outside)
		if err != nil || len(entries) != 0 {
			t.Fatalf("%s: the outside directory holds %v (%v), want nothing", tc.sub, entries, err)
		}
	}
}

func TestSubPathDirectoriesTakeTheVolumesMode(t *testing.T) {
	// As the kubelet: an emptyDir (0777, with the setgid bit of an
	// fsGroup, and the sticky bit of a tmpfs) gives a new subPath
	// directory the same mode, so a container of any user can write to it;
	// a directory that exists keeps its own.
	for _, tc := range []struct {
		name string
		mode os.FileMode
	}{
		{"emptyDir with an fsGroup on tmpfs", 0o777 | os.ModeSetgid | os.ModeSticky},
		{"emptyDir", 0o777},
		{"private directory", 0o750},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			if err := os.Mkdir(filepath.Join(data, "existing"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(data, tc.mode); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.Volumes = volumeDirs{"data": data} })
			pod := testPod(v1.RestartPolicyAlways, nil, "app", "old")
			pod.Spec.Volumes = []v1.Volume{{Name: "data"}}
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "test-sub/deeper"}}
			pod.Spec.Containers[1].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "existing"}}
			h.sync(pod)
			for p, want := range map[string]os.FileMode{
				"test-sub":        tc.mode,
				"test-sub/deeper": tc.mode,
				"existing":        0o700,
			} {
				st, err := os.Stat(filepath.Join(data, p))
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode() != os.ModeDir|want {
					t.Errorf("%s: mode %v, want %v", p, st.Mode(), os.ModeDir|want)
				}
			}
		})
	}
}
