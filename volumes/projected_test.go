package volumes_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/volumes"
	"github.com/nodekit/nodekit/volumes/volumestest"
)

type projectedEnv struct {
	p      *volumes.Projected
	objs   *volumes.Objects
	tokens *volumestest.Tokens
	clock  *clocktesting.FakePassiveClock
	fm     *fakeMounterT
}

func newProjected(t *testing.T) *projectedEnv {
	t.Helper()
	e := &projectedEnv{objs: &volumes.Objects{}, clock: clocktesting.NewFakePassiveClock(testTime), fm: fakeMounter()}
	e.tokens = &volumestest.Tokens{Clock: e.clock}
	e.p = volumes.NewProjected(volumes.PluginConfig{Objects: e.objs, Tokens: e.tokens, Mounter: e.fm, Allocatable: allocatable, Clock: e.clock})
	return e
}

func projectedVolume(name string, sources ...v1.VolumeProjection) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: sources}}}
}

func tokenSource(path, audience string, exp int64) v1.VolumeProjection {
	return v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: path, Audience: audience, ExpirationSeconds: &exp}}
}

func TestProjectedSources(t *testing.T) {
	e := newProjected(t)
	e.objs.SetConfigMap(cm("ca", map[string]string{"ca.crt": "CERT", "other": "x"}))
	e.objs.SetSecret(secret("creds", map[string]string{"token": "s3cr3t"}))
	pod := testPod(projectedVolume("all",
		v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{
			LocalObjectReference: v1.LocalObjectReference{Name: "ca"},
			Items:                []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
		}},
		v1.VolumeProjection{Secret: &v1.SecretProjection{
			LocalObjectReference: v1.LocalObjectReference{Name: "creds"},
			Items:                []v1.KeyToPath{{Key: "token", Path: "secret/token", Mode: ptr.To[int32](0o400)}},
		}},
		v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
			fieldItem("namespace", "metadata.namespace"),
			resourceItem("cpu", "app", "limits.cpu", ""),
		}}},
		tokenSource("token", "vault", 3600),
		v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}},
	))
	pod.Spec.ServiceAccountName = "builder"
	if e.p.Name() != "kubernetes.io/projected" || !e.p.CanSupport(&pod.Spec.Volumes[0]) {
		t.Errorf("Name %q, CanSupport %v", e.p.Name(), e.p.CanSupport(&pod.Spec.Volumes[0]))
	}
	dir := mustSetUp(t, e.p, pod)
	if !isMounted(t, e.fm, dir) {
		t.Errorf("%s is not on a tmpfs", dir)
	}
	checkContent(t, dir, map[string]string{
		"ca.crt":       "CERT",
		"secret/token": "s3cr3t",
		"namespace":    "ns",
		"cpu":          "4",
		"token":        "token-1:ns/builder:vault",
	})
	checkModes(t, dir, map[string]os.FileMode{"ca.crt": 0o644, "secret/token": 0o400, "token": 0o644})
	reqs := e.tokens.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d token requests, want 1", len(reqs))
	}
	want := authenticationv1.TokenRequestSpec{
		Audiences:         []string{"vault"},
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "uid-1"},
	}
	if diff := cmp.Diff(want, reqs[0].Spec); diff != "" || reqs[0].Namespace != "ns" || reqs[0].Name != "builder" {
		t.Errorf("token request for %s/%s (-want +got):\n%s", reqs[0].Namespace, reqs[0].Name, diff)
	}
}

// The token is asked for again at 80% of its lifetime, not before; the
// volume shows the new one through the ..data swap.
func TestProjectedTokenRefreshAt80Percent(t *testing.T) {
	e := newProjected(t)
	pod := testPod(projectedVolume("tok", tokenSource("token", "", 1000)))
	dir := mustSetUp(t, e.p, pod)
	first := link(t, dir+"/..data")
	e.clock.SetTime(testTime.Add(780 * time.Second)) // 78%, and the 10 s jitter
	if _, err := update(e.p, pod, dir, true); err != nil {
		t.Fatal(err)
	}
	if n := len(e.tokens.Requests()); n != 1 {
		t.Fatalf("%d token requests before 80%% of the lifetime, want 1", n)
	}
	if got := link(t, dir+"/..data"); got != first {
		t.Errorf("..data changed to %q with the same token", got)
	}
	e.clock.SetTime(testTime.Add(801 * time.Second))
	if _, err := update(e.p, pod, dir, true); err != nil {
		t.Fatal(err)
	}
	if n := len(e.tokens.Requests()); n != 2 {
		t.Fatalf("%d token requests past 80%% of the lifetime, want 2", n)
	}
	checkContent(t, dir, map[string]string{"token": "token-2:ns/default:"})
	if got := link(t, dir+"/..data"); got == first {
		t.Error("..data unchanged with a new token")
	}
}

// A long-lived token is asked for again after 24 hours.
func TestProjectedTokenRefreshAfter24h(t *testing.T) {
	e := newProjected(t)
	pod := testPod(projectedVolume("tok", tokenSource("token", "", 7*24*3600)))
	dir := mustSetUp(t, e.p, pod)
	e.clock.SetTime(testTime.Add(24*time.Hour - 11*time.Second))
	if _, err := update(e.p, pod, dir, true); err != nil {
		t.Fatal(err)
	}
	if n := len(e.tokens.Requests()); n != 1 {
		t.Fatalf("%d token requests before 24h, want 1", n)
	}
	e.clock.SetTime(testTime.Add(24*time.Hour + time.Second))
	if _, err := update(e.p, pod, dir, true); err != nil {
		t.Fatal(err)
	}
	if n := len(e.tokens.Requests()); n != 2 {
		t.Fatalf("%d token requests after 24h, want 2", n)
	}
}

// When a refresh fails the cached token is kept until it expires; then
// SetUp fails.
func TestProjectedTokenRefreshFailure(t *testing.T) {
	e := newProjected(t)
	pod := testPod(projectedVolume("tok", tokenSource("token", "", 1000)))
	dir := mustSetUp(t, e.p, pod)
	e.tokens.SetErr(errors.New("apiserver down"))
	e.clock.SetTime(testTime.Add(900 * time.Second))
	if _, err := update(e.p, pod, dir, true); err != nil {
		t.Fatalf("SetUp with a failed refresh of a valid token: %v", err)
	}
	checkContent(t, dir, map[string]string{"token": "token-1:ns/default:"})
	e.clock.SetTime(testTime.Add(1001 * time.Second))
	_, err := update(e.p, pod, dir, true)
	checkErr(t, err, nil, "apiserver down", "spec.volumes[tok].projected.sources[0].serviceAccountToken", "ns/default")
}

func TestProjectedTokenModeWithFSGroup(t *testing.T) {
	e := newProjected(t)
	pod := testPod(projectedVolume("tok", tokenSource("token", "", 3600)))
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To(int64(os.Getegid()))}
	dir := mustSetUp(t, e.p, pod)
	// 0600 from the plugin, group read from the fsGroup.
	checkModes(t, dir, map[string]os.FileMode{"token": 0o640})
}

func TestProjectedNoTokenGetter(t *testing.T) {
	p := volumes.NewProjected(volumes.PluginConfig{Objects: &volumes.Objects{}, NoTmpfs: true})
	_, err := setUp(t, p, testPod(projectedVolume("tok", tokenSource("token", "", 3600))))
	checkErr(t, err, nil, "sources[0].serviceAccountToken", "no TokenGetter")
}

func TestProjectedRefusedSources(t *testing.T) {
	e := newProjected(t)
	_, err := setUp(t, e.p, testPod(projectedVolume("ctb", v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("b"), Path: "ca.pem"}})))
	checkErr(t, err, nil, "spec.volumes[ctb].projected.sources[0].clusterTrustBundle", "not supported")
	_, err = setUp(t, e.p, testPod(projectedVolume("empty", v1.VolumeProjection{})))
	checkErr(t, err, nil, "spec.volumes[empty].projected.sources[0]", "no source")
}

func TestProjectedMissingObject(t *testing.T) {
	e := newProjected(t)
	_, err := setUp(t, e.p, testPod(projectedVolume("p", v1.VolumeProjection{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}}})))
	checkErr(t, err, runtime.ErrNotFound, `spec.volumes[p].projected.sources[0].secret: secret "absent" not found`)
	if len(e.fm.GetLog()) != 0 {
		t.Errorf("mounter used: %v", e.fm.GetLog())
	}
}

func TestProjectedUnsafePaths(t *testing.T) {
	e := newProjected(t)
	e.objs.SetConfigMap(cm("c", map[string]string{"k": "v"}))
	t.Run("configMap items", func(t *testing.T) {
		checkUnsafe(t, e.p, func(paths []string) *v1.Pod {
			return testPod(projectedVolume("p", v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{
				LocalObjectReference: v1.LocalObjectReference{Name: "c"}, Items: keyItems(paths)}}))
		})
	})
	t.Run("token and downwardAPI paths", func(t *testing.T) {
		checkUnsafe(t, e.p, func(paths []string) *v1.Pod {
			srcs := []v1.VolumeProjection{tokenSource(paths[0], "", 3600)}
			for _, p := range paths[1:] {
				srcs = append(srcs, v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{fieldItem(p, "metadata.name")}}})
			}
			return testPod(projectedVolume("p", srcs...))
		})
	})
}

func TestProjectedPlantedSymlink(t *testing.T) {
	e := newProjected(t)
	e.objs.SetConfigMap(cm("c", map[string]string{"a": "1"}))
	pod := testPod(projectedVolume("p", v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}))
	checkPlantedLink(t, e.p, pod, func() { e.objs.SetConfigMap(cm("c", map[string]string{"a": "2"})) })
}

func TestProjectedTearDown(t *testing.T) {
	e := newProjected(t)
	dir := mustSetUp(t, e.p, testPod(projectedVolume("tok", tokenSource("token", "", 3600))))
	if err := e.p.TearDown(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if isMounted(t, e.fm, dir) {
		t.Error("still mounted after TearDown")
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("after TearDown: %v, want the directory gone", err)
	}
}
