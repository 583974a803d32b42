package volumes_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mount "k8s.io/mount-utils"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/volumes"
)

func secretVolume(name string, src v1.SecretVolumeSource) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Secret: &src}}
}

func secret(name string, data map[string]string) *v1.Secret {
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func secretPlugin(t *testing.T, objs *volumes.Objects, fm mount.Interface) *volumes.Secret {
	t.Helper()
	p, err := volumes.NewSecret(volumes.PluginConfig{Objects: objs, Mounter: fm, Clock: clocktesting.NewFakePassiveClock(testTime)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSecretOnTmpfs(t *testing.T) {
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"user": "admin", "pass": "hunter2"}))
	fm := fakeMounter()
	p := secretPlugin(t, objs, fm)
	vol := secretVolume("creds", v1.SecretVolumeSource{
		SecretName: "creds",
		Items:      []v1.KeyToPath{{Key: "pass", Path: "p/pass", Mode: ptr.To[int32](0o400)}, {Key: "user", Path: "user"}},
	})
	if p.Name() != "kubernetes.io/secret" || !p.CanSupport(&vol) || p.Attributes(&vol) != (volumes.Attributes{Managed: true, ReadOnly: true, Refresh: true}) {
		t.Errorf("Name %q, CanSupport %v, Attributes %+v", p.Name(), p.CanSupport(&vol), p.Attributes(&vol))
	}
	pod := testPod(vol)
	dir := mustSetUp(t, p, pod)
	if !isMounted(t, fm, dir) {
		t.Fatalf("%s is not a mount point after SetUp", dir)
	}
	checkContent(t, dir, map[string]string{"p/pass": "hunter2", "user": "admin"})
	checkModes(t, dir, map[string]os.FileMode{"p/pass": 0o400, "user": 0o644})

	// An update mounts nothing more and shows the new content.
	objs.SetSecret(secret("creds", map[string]string{"user": "root", "pass": "hunter2"}))
	if _, err := update(p, pod, dir, true); err != nil {
		t.Fatal(err)
	}
	checkContent(t, dir, map[string]string{"p/pass": "hunter2", "user": "root"})
	mounts := 0
	for _, a := range fm.GetLog() {
		if a.Action == mount.FakeActionMount {
			mounts++
		}
	}
	if mounts != 1 {
		t.Errorf("%d mounts, want 1", mounts)
	}
}

func TestSecretTearDownUnmountsThenRemoves(t *testing.T) {
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"k": "v"}))
	fm := fakeMounter()
	var existedAtUnmount bool
	fm.UnmountFunc = func(p string) error {
		_, err := os.Stat(filepath.Join(p, "k"))
		existedAtUnmount = err == nil
		return nil
	}
	p := secretPlugin(t, objs, fm)
	dir := mustSetUp(t, p, testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "creds"})))
	if err := p.TearDown(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if !existedAtUnmount {
		t.Error("the content was removed before the unmount")
	}
	if isMounted(t, fm, dir) {
		t.Error("still mounted after TearDown")
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after TearDown: %v, want the directory gone", err)
	}
	if err := p.TearDown(context.Background(), dir); err != nil {
		t.Errorf("TearDown of a missing directory: %v", err)
	}
}

func TestSecretTearDownUnmountFails(t *testing.T) {
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"k": "v"}))
	fm := fakeMounter()
	p := secretPlugin(t, objs, fm)
	dir := mustSetUp(t, p, testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "creds"})))
	fm.UnmountFunc = func(string) error { return errors.New("device busy") }
	if err := p.TearDown(context.Background(), dir); err == nil {
		t.Fatal("TearDown succeeded though the unmount failed")
	}
	if _, err := os.Stat(filepath.Join(dir, "k")); err != nil {
		t.Errorf("content removed though the unmount failed: %v", err)
	}
}

func TestSecretMissingMountsNothing(t *testing.T) {
	fm := fakeMounter()
	p := secretPlugin(t, &volumes.Objects{}, fm)
	_, err := setUp(t, p, testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "absent"})))
	checkErr(t, err, runtime.ErrNotFound)
	if err.Error() != `secret "absent" not found` {
		t.Errorf("error %q, want the kubelet's %q", err, `secret "absent" not found`)
	}
	if len(fm.GetLog()) != 0 {
		t.Errorf("mounter used: %v", fm.GetLog())
	}
}

func TestSecretOptional(t *testing.T) {
	p := secretPlugin(t, &volumes.Objects{}, fakeMounter())
	dir := mustSetUp(t, p, testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "absent", Optional: ptr.To(true)})))
	checkContent(t, dir, map[string]string{})
}

func TestSecretMissingKey(t *testing.T) {
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"k": "v"}))
	p := secretPlugin(t, objs, fakeMounter())
	_, err := setUp(t, p, testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "creds", Items: []v1.KeyToPath{{Key: "nope", Path: "x"}}})))
	checkErr(t, err, nil, "spec.volumes[creds].secret.items[0].key", `"nope"`)
}

// A first SetUp that fails after mounting leaves nothing mounted.
func TestSecretFailedFirstSetUpUnmounts(t *testing.T) {
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"k": "v"}))
	fm := fakeMounter()
	p := secretPlugin(t, objs, fm)
	pod := testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "creds"}))
	dir := filepath.Join(t.TempDir(), "creds")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A planted ..data the writer refuses (the fake mount hides nothing).
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	_, err := update(p, pod, dir, false)
	checkErr(t, err, volumes.ErrUnsafePath, "..data")
	if isMounted(t, fm, dir) {
		t.Error("tmpfs left mounted after a failed first SetUp")
	}
}

func TestSecretUnsafePaths(t *testing.T) {
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"k": "v"}))
	p := secretPlugin(t, objs, fakeMounter())
	checkUnsafe(t, p, func(paths []string) *v1.Pod {
		return testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "creds", Items: keyItems(paths)}))
	})
}

func TestSecretPlantedSymlink(t *testing.T) {
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"a": "1"}))
	p := secretPlugin(t, objs, fakeMounter())
	pod := testPod(secretVolume("creds", v1.SecretVolumeSource{SecretName: "creds"}))
	checkPlantedLink(t, p, pod, func() { objs.SetSecret(secret("creds", map[string]string{"a": "2"})) })
}
