package volumes_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mount "k8s.io/mount-utils"

	"github.com/nodekit/nodekit/volumes"
)

func testPod(vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"},
		Spec: v1.PodSpec{
			Volumes:    vols,
			Containers: []v1.Container{{Name: "app"}},
		},
	}
}

// setUp calls SetUp for the pod's first volume in a fresh pod directory
// and returns the volume directory.
func setUp(t *testing.T, p volumes.Plugin, pod *v1.Pod) (string, error) {
	t.Helper()
	podDir := t.TempDir()
	dir := volumes.VolumeDir(podDir, p.Name(), pod.Spec.Volumes[0].Name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := update(p, pod, dir, false)
	return dir, err
}

func update(p volumes.Plugin, pod *v1.Pod, dir string, upd bool) (string, error) {
	return p.SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: &pod.Spec.Volumes[0], Dir: dir, Update: upd})
}

func mustSetUp(t *testing.T, p volumes.Plugin, pod *v1.Pod) string {
	t.Helper()
	dir, err := setUp(t, p, pod)
	if err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	return dir
}

func checkContent(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	if diff := cmp.Diff(want, readVolume(t, dir)); diff != "" {
		t.Errorf("content of %s (-want +got):\n%s", dir, diff)
	}
}

func checkModes(t *testing.T, dir string, want map[string]os.FileMode) {
	t.Helper()
	for p, m := range want {
		if got := modeOf(t, filepath.Join(dir, p)); got != m {
			t.Errorf("mode of %s = %#o, want %#o", p, got, m)
		}
	}
}

func checkErr(t *testing.T, err error, is error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one naming %q", parts)
	}
	if is != nil && !errors.Is(err, is) {
		t.Errorf("error %q does not wrap %v", err, is)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %q", err, p)
		}
	}
}

type fakeMounterT = mount.FakeMounter

func fakeMounter() *mount.FakeMounter { return mount.NewFakeMounter(nil) }

func isMounted(t *testing.T, fm *mount.FakeMounter, dir string) bool {
	t.Helper()
	mps, err := fm.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range mps {
		if mp.Path == dir {
			if mp.Type != "tmpfs" {
				t.Errorf("%s mounted as %q, want tmpfs", dir, mp.Type)
			}
			return true
		}
	}
	return false
}

// unsafeCase is a path a volume's item may name that must be refused.
type unsafeCase struct {
	name  string
	paths []string // one item per path
	want  string
}

var unsafeCases = []unsafeCase{
	{"dot-dot", []string{"../../../outside/file"}, `"../../../outside/file"`},
	{"absolute", []string{"/tmp/evil"}, `"/tmp/evil"`},
	{"reserved", []string{"..data"}, `"..data"`},
	{"collision", []string{"a", "./a"}, `"./a" collides`},
}

// checkUnsafe runs each unsafe case through a plugin: mk builds a pod
// whose first volume writes the given paths. The error wraps
// ErrUnsafePath and names the path, and nothing is written next to the
// volume.
func checkUnsafe(t *testing.T, p volumes.Plugin, mk func(paths []string) *v1.Pod) {
	t.Helper()
	for _, tc := range unsafeCases {
		t.Run(tc.name, func(t *testing.T) {
			pod := mk(tc.paths)
			podDir := t.TempDir()
			dir := volumes.VolumeDir(podDir, p.Name(), pod.Spec.Volumes[0].Name)
			if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, podDir)
			_, err := update(p, pod, dir, false)
			checkErr(t, err, volumes.ErrUnsafePath, tc.want)
			if diff := cmp.Diff(before, snapshot(t, podDir)); diff != "" {
				t.Errorf("pod directory changed (-before +after):\n%s", diff)
			}
		})
	}
}

// checkPlantedLink sets up the volume of pod, replaces its visible name
// "a" by a symlink to a directory outside, changes the content with
// change, and checks that the update is refused naming the link and that
// the outside directory is untouched.
func checkPlantedLink(t *testing.T, p volumes.Plugin, pod *v1.Pod, change func()) {
	t.Helper()
	dir := mustSetUp(t, p, pod)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "a"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustReplaceLink(t, outside, filepath.Join(dir, "a"))
	before := snapshot(t, outside)
	change()
	_, err := update(p, pod, dir, true)
	checkErr(t, err, volumes.ErrUnsafePath, filepath.Join(dir, "a"))
	if diff := cmp.Diff(before, snapshot(t, outside)); diff != "" {
		t.Errorf("outside changed (-before +after):\n%s", diff)
	}
}

func keyItems(paths []string) []v1.KeyToPath {
	var items []v1.KeyToPath
	for _, p := range paths {
		items = append(items, v1.KeyToPath{Key: "k", Path: p})
	}
	return items
}

func TestContentPluginsAttributes(t *testing.T) {
	objs := &volumes.Objects{}
	cfg := volumes.PluginConfig{Objects: objs, NoTmpfs: true}
	cmP, _ := volumes.NewConfigMap(cfg)
	secP, _ := volumes.NewSecret(cfg)
	dwP := volumes.NewDownwardAPI(cfg)
	prP := volumes.NewProjected(cfg)
	vols := map[string]v1.Volume{
		"kubernetes.io/configmap":    configMapVolume("v", v1.ConfigMapVolumeSource{}),
		"kubernetes.io/secret":       secretVolume("v", v1.SecretVolumeSource{}),
		"kubernetes.io/downward-api": downwardVolume("v"),
		"kubernetes.io/projected":    projectedVolume("v"),
	}
	want := volumes.Attributes{Managed: true, ReadOnly: true, Refresh: true}
	for _, p := range []volumes.Plugin{cmP, secP, dwP, prP} {
		vol, ok := vols[p.Name()]
		if !ok {
			t.Errorf("unexpected plugin name %q", p.Name())
			continue
		}
		if got := p.Attributes(&vol); got != want {
			t.Errorf("%s: Attributes = %+v, want %+v", p.Name(), got, want)
		}
		for name, other := range vols {
			if got := p.CanSupport(&other); got != (name == p.Name()) {
				t.Errorf("%s: CanSupport(%s volume) = %v", p.Name(), name, got)
			}
		}
	}
}
