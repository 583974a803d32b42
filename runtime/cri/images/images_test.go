package images_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri/images"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// realWait bounds how long a test waits, in real time, for what a step of
// the fake clock sets off.
const realWait = 10 * time.Second

// recorder is a fakecri image service that records the credentials of
// each pull.
type recorder struct {
	*fakecri.Runtime
	mu    sync.Mutex
	auths []*runtimeapi.AuthConfig
}

func (r *recorder) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.auths = append(r.auths, auth)
	r.mu.Unlock()
	return r.Runtime.PullImage(ctx, img, auth, sb)
}

type harness struct {
	t     *testing.T
	fake  *fakecri.Runtime
	rec   *recorder
	clock *clocktesting.FakeClock
	m     *images.Manager

	mu     sync.Mutex
	events []string
}

// newHarness returns a Manager on the fake clock over a fakecri that
// holds busybox:1.36 and whatever cfg adds.
func newHarness(t *testing.T, cfg fakecri.Config, opts ...func(*images.Config)) *harness {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	cfg.Clock = clk
	cfg.Images = append(cfg.Images, "busybox:1.36")
	fake, err := fakecri.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, fake: fake, rec: &recorder{Runtime: fake}, clock: clk}
	mcfg := images.Config{
		Service: h.rec,
		Clock:   clk,
		Events: func(_ *v1.Pod, _, reason, msg string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, reason+": "+msg)
		},
	}
	for _, o := range opts {
		o(&mcfg)
	}
	h.m, err = images.New(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) eventsWith(reason string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		if strings.HasPrefix(e, reason+": ") {
			out = append(out, e)
		}
	}
	return out
}

func (h *harness) pulls() int {
	n := 0
	for _, c := range h.fake.Calls() {
		if c == "PullImage" {
			n++
		}
	}
	return n
}

// ensure asks for the image of the pod's first container.
func (h *harness) ensure(pod *v1.Pod) (*runtimeapi.Image, string, error) {
	return h.m.EnsureImage(context.Background(), pod, &pod.Spec.Containers[0], "spec.containers[0]", sandboxConfig(pod))
}

func testPod(image string, policy v1.PullPolicy) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: image, ImagePullPolicy: policy}}},
	}
}

func sandboxConfig(pod *v1.Pod) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		Annotations: pod.Annotations,
	}
}

func TestEnsureImagePolicies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		image  string
		policy v1.PullPolicy
		fake   fakecri.Config
		reason string
		pulls  int
	}{
		{"present, tagged: not pulled", "busybox:1.36", "", fakecri.Config{}, "", 0},
		{"absent, tagged: pulled", "nodekit.test/app:1", "", fakecri.Config{}, "", 1},
		{"latest: pulled though present", "nodekit.test/app:latest", "", fakecri.Config{Images: []string{"nodekit.test/app:latest"}}, "", 1},
		{"no tag: pulled though present", "nodekit.test/app", "", fakecri.Config{Images: []string{"nodekit.test/app:latest"}}, "", 1},
		{"digest: not pulled when present", "busybox@sha256:" + strings.Repeat("a", 64), "", fakecri.Config{Images: []string{"busybox@sha256:" + strings.Repeat("a", 64)}}, "", 0},
		{"Always: pulled though present", "busybox:1.36", v1.PullAlways, fakecri.Config{}, "", 1},
		{"Never, present", "busybox:1.36", v1.PullNever, fakecri.Config{}, "", 0},
		{"empty image", "", "", fakecri.Config{}, images.ReasonInvalidImageName, 0},
		{"invalid name", "Not A/Valid:Name!", "", fakecri.Config{}, images.ReasonInvalidImageName, 0},
		{"Never, absent", "nodekit.test/absent:1", v1.PullNever, fakecri.Config{}, images.ReasonErrImageNeverPull, 0},
		{"pull fails", "nodekit.test/absent:1", v1.PullIfNotPresent, fakecri.Config{Registry: []string{}}, images.ReasonErrImagePull, 1},
		{"Always, pull fails", "busybox:1.36", v1.PullAlways, fakecri.Config{Registry: []string{}}, images.ReasonErrImagePull, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.fake)
			img, reason, err := h.ensure(testPod(tc.image, tc.policy))
			if reason != tc.reason || (err != nil) != (tc.reason != "") || h.pulls() != tc.pulls {
				t.Fatalf("reason %q, error %v after %d pulls; want reason %q after %d", reason, err, h.pulls(), tc.reason, tc.pulls)
			}
			if tc.reason == "" && img.GetId() == "" {
				t.Errorf("image %v, want the runtime's image with its ID", img)
			}
			if tc.reason == images.ReasonInvalidImageName && !strings.Contains(err.Error(), "spec.containers[0].image") {
				t.Errorf("error %q does not name the field", err)
			}
		})
	}
}

func TestPullBackOff(t *testing.T) {
	h := newHarness(t, fakecri.Config{Registry: []string{}})
	pod := testPod("registry.test/missing:1", "")
	for i, want := range []struct {
		step   time.Duration
		reason string
		pulls  int
	}{
		{0, images.ReasonErrImagePull, 1},
		{5 * time.Second, images.ReasonImagePullBackOff, 1},
		{5 * time.Second, images.ReasonErrImagePull, 2},
		{19 * time.Second, images.ReasonImagePullBackOff, 2},
		{time.Second, images.ReasonErrImagePull, 3},
	} {
		h.clock.Step(want.step)
		_, reason, err := h.ensure(pod)
		if reason != want.reason || h.pulls() != want.pulls {
			t.Fatalf("try %d: %s after %d pulls (%v), want %s after %d", i+1, reason, h.pulls(), err, want.reason, want.pulls)
		}
	}
	if len(h.eventsWith("Failed")) != 3 || len(h.eventsWith("Pulling")) != 3 || len(h.eventsWith("BackOff")) != 2 {
		t.Errorf("events: %v", h.events)
	}
	// The back-off is per pod: another pod pulls at once.
	other := testPod("registry.test/missing:1", "")
	other.UID = types.UID("uid-other")
	if _, reason, _ := h.ensure(other); reason != images.ReasonErrImagePull || h.pulls() != 4 {
		t.Errorf("another pod: %s after %d pulls, want a pull", reason, h.pulls())
	}
}

func TestPullBackOffConfig(t *testing.T) {
	h := newHarness(t, fakecri.Config{Registry: []string{}}, func(c *images.Config) {
		c.BackOff = images.BackOff{Initial: time.Second, Max: 2 * time.Second}
	})
	pod := testPod("registry.test/missing:1", "")
	for i, step := range []time.Duration{0, time.Second, 2 * time.Second, 2 * time.Second} {
		h.clock.Step(step)
		if _, reason, _ := h.ensure(pod); reason != images.ReasonErrImagePull || h.pulls() != i+1 {
			t.Fatalf("try %d after %s: %s after %d pulls, want a pull each time the back-off ends", i+1, step, reason, h.pulls())
		}
	}
}

// objects is an in-memory SecretGetter.
type objects map[string]*v1.Secret

func (o objects) GetSecret(_ context.Context, ns, name string) (*v1.Secret, error) {
	if s, ok := o[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("secret %s/%s: %w", ns, name, runtime.ErrNotFound)
}

func TestPullSecrets(t *testing.T) {
	dockerCfg := func(entries string) *v1.Secret {
		return &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{` + entries + `}}`)}}
	}
	auth := base64.StdEncoding.EncodeToString([]byte("bob:hunter2"))
	objs := objects{
		"ns/private": dockerCfg(`"https://registry.test": {"auth": "` + auth + `"}, "other.test": {"username": "x", "password": "y"}`),
		"ns/hub":     dockerCfg(`"https://index.docker.io/v1/": {"username": "hubuser", "password": "hubpass"}`),
		"ns/team":    dockerCfg(`"*.corp.test/team": {"username": "teamuser", "password": "p"}`),
		"ns/port":    dockerCfg(`"localhost:5000": {"auth": "` + auth + `"}, "named.test": {"username": "n", "password": "p", "serveraddress": "https://named.test"}`),
		"ns/legacy":  {Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: []byte(`{"registry.test": {"username": "old", "password": "p"}}`)}},
		"ns/broken":  {Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("{not json")}},
		"ns/opaque":  {Type: v1.SecretTypeOpaque},
	}
	for _, tc := range []struct {
		name     string
		image    string
		secrets  []string
		noGetter bool
		wantUser string
		// wantServer is the AuthConfig's serverAddress: the entry's own
		// "serveraddress", never the key (containerd drops credentials
		// whose serverAddress does not parse to the pulled host, as
		// "localhost:5000" does not).
		wantServer string
		reason     string
		wantMsg    string
	}{
		{name: "matching registry", image: "registry.test/app:1", secrets: []string{"missing", "private"}, wantUser: "bob"},
		{name: "docker hub alias", image: "busybox:1.37", secrets: []string{"hub"}, wantUser: "hubuser"},
		{name: "glob host and path prefix", image: "eu.corp.test/team/app:1", secrets: []string{"team"}, wantUser: "teamuser"},
		{name: "path prefix not matched", image: "eu.corp.test/other/app:1", secrets: []string{"team"}},
		{name: "dockercfg", image: "registry.test/app:1", secrets: []string{"legacy"}, wantUser: "old"},
		{name: "registry with a port", image: "localhost:5000/pause:testing", secrets: []string{"port"}, wantUser: "bob"},
		{name: "entry naming its server", image: "named.test/app:1", secrets: []string{"port"}, wantUser: "n", wantServer: "https://named.test"},
		{name: "no match pulls anonymously", image: "elsewhere.test/app:1", secrets: []string{"private"}},
		{name: "no secret getter pulls anonymously", image: "registry.test/app:1", secrets: []string{"private"}, noGetter: true},
		{name: "malformed secret", image: "registry.test/app:1", secrets: []string{"broken"}, reason: images.ReasonErrImagePull, wantMsg: "imagePullSecrets[0] (broken): data[.dockerconfigjson]"},
		{name: "wrong type", image: "registry.test/app:1", secrets: []string{"opaque"}, reason: images.ReasonErrImagePull, wantMsg: "imagePullSecrets[0] (opaque): type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fakecri.Config{}, func(c *images.Config) {
				if !tc.noGetter {
					c.Secrets = objs
				}
			})
			pod := testPod(tc.image, "")
			for _, s := range tc.secrets {
				pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
			}
			_, reason, err := h.ensure(pod)
			if reason != tc.reason {
				t.Fatalf("reason %q (%v), want %q", reason, err, tc.reason)
			}
			if tc.reason != "" {
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("error %q does not say %q", err, tc.wantMsg)
				}
				return
			}
			h.rec.mu.Lock()
			defer h.rec.mu.Unlock()
			if len(h.rec.auths) != 1 || h.rec.auths[0].GetUsername() != tc.wantUser || h.rec.auths[0].GetServerAddress() != tc.wantServer {
				t.Errorf("pulled with %v, want user %q and serverAddress %q", h.rec.auths, tc.wantUser, tc.wantServer)
			}
			if tc.wantUser == "bob" && h.rec.auths[0].GetPassword() != "hunter2" {
				t.Errorf("password %q, want the one from auth", h.rec.auths[0].GetPassword())
			}
			if tc.noGetter || strings.Contains(strings.Join(tc.secrets, ","), "missing") {
				if len(h.eventsWith("FailedToRetrieveImagePullSecret")) != 1 {
					t.Errorf("events %v, want one FailedToRetrieveImagePullSecret", h.events)
				}
			}
		})
	}
}

// gatedImages blocks pulls until released and counts how many run at once.
type gatedImages struct {
	*fakecri.Runtime
	gate            chan struct{}
	inflight, peakN atomic.Int32
}

func (g *gatedImages) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	n := g.inflight.Add(1)
	for {
		p := g.peakN.Load()
		if n <= p || g.peakN.CompareAndSwap(p, n) {
			break
		}
	}
	<-g.gate
	g.inflight.Add(-1)
	return g.Runtime.PullImage(ctx, img, auth, sb)
}

func TestParallelPulls(t *testing.T) {
	for _, tc := range []struct {
		parallel int
		wantPeak int32
	}{{0, 1}, {1, 1}, {2, 2}} {
		t.Run(fmt.Sprint("max-", tc.parallel), func(t *testing.T) {
			fake, _ := fakecri.New(fakecri.Config{})
			g := &gatedImages{Runtime: fake, gate: make(chan struct{})}
			m, err := images.New(images.Config{Service: g, MaxParallelPulls: tc.parallel})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 3)
			for i := range 3 {
				pod := testPod(fmt.Sprintf("registry.test/app%d:latest", i), "")
				pod.UID = types.UID(fmt.Sprint("uid-", i))
				go func() {
					_, _, err := m.EnsureImage(context.Background(), pod, &pod.Spec.Containers[0], "spec.containers[0]", sandboxConfig(pod))
					done <- err
				}()
			}
			// Wait (bounded, without sleeping) until as many pulls as the
			// limit allows have started, then let them all finish.
			deadline := time.Now().Add(realWait)
			for g.inflight.Load() < tc.wantPeak {
				if time.Now().After(deadline) {
					t.Fatalf("%d pulls under way after %s, want %d", g.inflight.Load(), realWait, tc.wantPeak)
				}
				waitABit()
			}
			close(g.gate)
			for range 3 {
				if err := <-done; err != nil {
					t.Error(err)
				}
			}
			if got := g.peakN.Load(); got != tc.wantPeak {
				t.Errorf("peak concurrent pulls %d, want %d", got, tc.wantPeak)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	fake, _ := fakecri.New(fakecri.Config{})
	for _, tc := range []struct {
		name string
		cfg  images.Config
		want string
	}{
		{"no service", images.Config{}, "Config.Service is required"},
		{"negative parallel pulls", images.Config{Service: fake, MaxParallelPulls: -1}, "MaxParallelPulls must not be negative"},
		{"max below initial", images.Config{Service: fake, BackOff: images.BackOff{Initial: time.Minute, Max: time.Second}}, "Config.BackOff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := images.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// A failed ImageStatus is classified as the client would classify it.
func TestImageStatusErrors(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	h.fake.InjectError("ImageStatus", errors.New("disk on fire"))
	_, reason, err := h.ensure(testPod("busybox:1.36", ""))
	if reason != images.ReasonErrImagePull || !strings.Contains(err.Error(), "ImageStatus busybox:1.36") {
		t.Errorf("reason %q, error %v; want ErrImagePull naming the call and image", reason, err)
	}
}
