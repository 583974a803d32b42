package volumes_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/volumes"
)

func configMapVolume(name string, src v1.ConfigMapVolumeSource) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{ConfigMap: &src}}
}

func configMapPlugin(t *testing.T, objs *volumes.Objects) *volumes.ConfigMap {
	t.Helper()
	p, err := volumes.NewConfigMap(volumes.PluginConfig{Objects: objs, Clock: clocktesting.NewFakePassiveClock(testTime)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func objectsWith(cms ...*v1.ConfigMap) *volumes.Objects {
	objs := &volumes.Objects{}
	for _, cm := range cms {
		objs.SetConfigMap(cm)
	}
	return objs
}

func cm(name string, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: data}
}

func TestConfigMapPluginBasics(t *testing.T) {
	p := configMapPlugin(t, objectsWith())
	vol := configMapVolume("cfg", v1.ConfigMapVolumeSource{})
	if p.Name() != "kubernetes.io/configmap" || !p.CanSupport(&vol) {
		t.Errorf("Name = %q, CanSupport = %v", p.Name(), p.CanSupport(&vol))
	}
	if p.CanSupport(&v1.Volume{Name: "x", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}) {
		t.Error("CanSupport(emptyDir) = true")
	}
	if got, want := p.Attributes(&vol), (volumes.Attributes{Managed: true, ReadOnly: true, Refresh: true}); got != want {
		t.Errorf("Attributes = %+v, want %+v", got, want)
	}
	if _, err := volumes.NewConfigMap(volumes.PluginConfig{}); err == nil {
		t.Error("NewConfigMap(nil) succeeded")
	}
}

func TestConfigMapAllKeys(t *testing.T) {
	c := cm("settings", map[string]string{"a.conf": "alpha", "b.conf": "beta"})
	c.BinaryData = map[string][]byte{"bin": {0, 1, 2}}
	p := configMapPlugin(t, objectsWith(c))
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"},
		DefaultMode:          ptr.To[int32](0o640),
	}))
	podDir := t.TempDir()
	dir := volumes.VolumeDir(podDir, p.Name(), "cfg")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := update(p, pod, dir, false)
	if err != nil || got != dir {
		t.Fatalf("SetUp = %q, %v; want %q", got, err, dir)
	}
	checkContent(t, dir, map[string]string{"a.conf": "alpha", "b.conf": "beta", "bin": "\x00\x01\x02"})
	checkModes(t, dir, map[string]os.FileMode{"a.conf": 0o640, "bin": 0o640})
}

func TestConfigMapItems(t *testing.T) {
	p := configMapPlugin(t, objectsWith(cm("settings", map[string]string{"a": "alpha", "b": "beta", "c": "gamma"})))
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"},
		Items: []v1.KeyToPath{
			{Key: "a", Path: "nested/dir/alpha", Mode: ptr.To[int32](0o400)},
			{Key: "b", Path: "beta"},
		},
	}))
	dir := mustSetUp(t, p, pod)
	checkContent(t, dir, map[string]string{"nested/dir/alpha": "alpha", "beta": "beta"})
	checkModes(t, dir, map[string]os.FileMode{"nested/dir/alpha": 0o400, "beta": 0o644})
	if got := link(t, filepath.Join(dir, "nested")); got != "..data/nested" {
		t.Errorf("nested -> %q, want ..data/nested", got)
	}
}

func TestConfigMapUpdate(t *testing.T) {
	objs := objectsWith(cm("settings", map[string]string{"a": "1", "b": "2"}))
	clk := clocktesting.NewFakePassiveClock(testTime)
	p, err := volumes.NewConfigMap(volumes.PluginConfig{Objects: objs, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}))
	dir := mustSetUp(t, p, pod)
	first := link(t, filepath.Join(dir, "..data"))

	// Unchanged: nothing is rewritten.
	before := snapshot(t, dir)
	clk.SetTime(testTime.Add(time.Minute))
	if _, err := update(p, pod, dir, true); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("unchanged configMap rewrote the volume (-before +after):\n%s", diff)
	}

	// Changed: a new generation through the ..data swap.
	objs.SetConfigMap(cm("settings", map[string]string{"a": "one", "c": "3"}))
	if _, err := update(p, pod, dir, true); err != nil {
		t.Fatal(err)
	}
	if second := link(t, filepath.Join(dir, "..data")); second == first {
		t.Errorf("..data still -> %q after a change", first)
	}
	checkContent(t, dir, map[string]string{"a": "one", "c": "3"})
	if n := len(generations(t, dir)); n != 1 {
		t.Errorf("%d generations, want 1", n)
	}
}

func TestConfigMapMissing(t *testing.T) {
	p := configMapPlugin(t, objectsWith())
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}}))
	dir, err := setUp(t, p, pod)
	checkErr(t, err, runtime.ErrNotFound)
	if err.Error() != `configmap "absent" not found` {
		t.Errorf("error %q, want the kubelet's %q", err, `configmap "absent" not found`)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("volume directory after a failed SetUp: %v, want none", err)
	}
}

func TestConfigMapOptional(t *testing.T) {
	t.Run("missing object", func(t *testing.T) {
		p := configMapPlugin(t, objectsWith())
		pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "absent"},
			Items:                []v1.KeyToPath{{Key: "a", Path: "a"}},
			Optional:             ptr.To(true),
		}))
		dir := mustSetUp(t, p, pod)
		checkContent(t, dir, map[string]string{})
		if _, err := os.Stat(filepath.Join(dir, "..data")); err != nil {
			t.Errorf("empty volume has no ..data: %v", err)
		}
	})
	t.Run("missing key", func(t *testing.T) {
		p := configMapPlugin(t, objectsWith(cm("settings", map[string]string{"a": "1"})))
		pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "settings"},
			Items:                []v1.KeyToPath{{Key: "a", Path: "a"}, {Key: "gone", Path: "gone"}},
			Optional:             ptr.To(true),
		}))
		checkContent(t, mustSetUp(t, p, pod), map[string]string{"a": "1"})
	})
}

func TestConfigMapMissingKey(t *testing.T) {
	p := configMapPlugin(t, objectsWith(cm("settings", map[string]string{"a": "1"})))
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"},
		Items:                []v1.KeyToPath{{Key: "gone", Path: "x"}},
	}))
	_, err := setUp(t, p, pod)
	checkErr(t, err, nil, "spec.volumes[cfg].configMap.items[0].key", `"gone"`)
}

func TestConfigMapBadMode(t *testing.T) {
	p := configMapPlugin(t, objectsWith(cm("settings", map[string]string{"a": "1"})))
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"},
		Items:                []v1.KeyToPath{{Key: "a", Path: "a", Mode: ptr.To[int32](0o4755)}},
	}))
	_, err := setUp(t, p, pod)
	checkErr(t, err, nil, "spec.volumes[cfg].configMap.items[0].mode")
}

func TestConfigMapUnsafePaths(t *testing.T) {
	p := configMapPlugin(t, objectsWith(cm("settings", map[string]string{"k": "evil"})))
	checkUnsafe(t, p, func(paths []string) *v1.Pod {
		return testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "settings"},
			Items:                keyItems(paths),
		}))
	})
	t.Run("key of the object", func(t *testing.T) {
		p := configMapPlugin(t, objectsWith(cm("evil", map[string]string{"../../escape": "x"})))
		pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "evil"}}))
		_, err := setUp(t, p, pod)
		checkErr(t, err, volumes.ErrUnsafePath, `"../../escape"`)
	})
	t.Run("key in data and binaryData", func(t *testing.T) {
		c := cm("dup", map[string]string{"k": "x"})
		c.BinaryData = map[string][]byte{"k": []byte("y")}
		p := configMapPlugin(t, objectsWith(c))
		pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "dup"}}))
		_, err := setUp(t, p, pod)
		checkErr(t, err, volumes.ErrUnsafePath, `"k"`)
	})
}

func TestConfigMapPlantedSymlink(t *testing.T) {
	objs := objectsWith(cm("settings", map[string]string{"a": "1"}))
	p := configMapPlugin(t, objs)
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}))
	checkPlantedLink(t, p, pod, func() { objs.SetConfigMap(cm("settings", map[string]string{"a": "2"})) })
}

func TestConfigMapTearDown(t *testing.T) {
	p := configMapPlugin(t, objectsWith(cm("settings", map[string]string{"a": "1"})))
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}))
	dir := mustSetUp(t, p, pod)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "f"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "planted")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, outside)
	if err := p.TearDown(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after TearDown: %v, want the directory gone", err)
	}
	if diff := cmp.Diff(before, snapshot(t, outside)); diff != "" {
		t.Errorf("outside changed (-before +after):\n%s", diff)
	}
	if err := p.TearDown(context.Background(), dir); err != nil {
		t.Errorf("TearDown of a missing directory: %v", err)
	}
}

// Before a new generation is switched in, it already has the pod's
// fsGroup, so a container of another user can read it at once.
func TestConfigMapFSGroupBeforeSwitch(t *testing.T) {
	testenv.Privileged.Root(t, "changing a file's group to any group")
	p := configMapPlugin(t, objectsWith(cm("settings", map[string]string{"a": "1"})))
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"},
		DefaultMode:          ptr.To[int32](0o400),
		Items:                []v1.KeyToPath{{Key: "a", Path: "d/a"}},
	}))
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](4321)}
	dir := mustSetUp(t, p, pod)
	for _, rel := range []string{"..data/", "..data/d", "..data/d/a"} {
		fi, err := os.Stat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if gid := gidOf(fi); gid != 4321 {
			t.Errorf("%s has group %d, want 4321", rel, gid)
		}
	}
	checkModes(t, dir, map[string]os.FileMode{"d/a": 0o440})
}

// failingGetter fails every get with err.
type failingGetter struct{ err error }

func (g failingGetter) GetConfigMap(context.Context, string, string) (*v1.ConfigMap, error) {
	return nil, g.err
}

func (g failingGetter) GetSecret(context.Context, string, string) (*v1.Secret, error) {
	return nil, g.err
}

// Only a missing object is forgiven by optional; another failure of the
// getter fails SetUp.
func TestConfigMapGetterFailure(t *testing.T) {
	unavailable := errors.New("apiserver unavailable")
	p, err := volumes.NewConfigMap(volumes.PluginConfig{Objects: failingGetter{unavailable}})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"},
		Optional:             ptr.To(true),
	}))
	_, err = setUp(t, p, pod)
	checkErr(t, err, unavailable, `get configmap "settings"`)
	if errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("error %q wraps ErrNotFound", err)
	}
}

// A missing configMap is reported as the kubelet reports it: the event
// is `MountVolume.SetUp failed for volume "cfg" : configmap "settings"
// not found`, and WaitForAttachAndMount's error names the pod and the
// field once.
func TestConfigMapMissingIsReportedAsTheKubeletDoes(t *testing.T) {
	fm := newHarness(t).mounter
	h := newHarness(t, volumes.DefaultPlugins(volumes.PluginConfig{Mounter: fm, Objects: &volumes.Objects{}})...)
	pod := podWith("web", []v1.Volume{configMapVolume("cfg", v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}})}, mountOf("cfg"))
	h.m.AddPod(pod)
	err := h.wait(pod)
	want := `unmounted volumes=[cfg], unattached volumes=[], failed to process volumes=[]: pod default/web: spec.volumes[0] (cfg): configmap "settings" not found`
	if err == nil || err.Error() != want {
		t.Errorf("WaitForAttachAndMount: %v\nwant %s", err, want)
	}
	wantEv := []string{`web Warning FailedMount MountVolume.SetUp failed for volume "cfg" : configmap "settings" not found`}
	// The event is sent just after the state WaitForAttachAndMount saw.
	h.eventually(0, func() bool { return len(h.eventList()) > 0 })
	if ev := h.eventList(); !slices.Equal(ev, wantEv) {
		t.Errorf("events %q\nwant %q", ev, wantEv)
	}
}
