package cri_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// fixedImages is an ImageManager that answers from a table and records
// what it was asked.
type fixedImages struct {
	mu     sync.Mutex
	asked  []string // field=image
	images map[string]*runtimeapi.Image
}

func (f *fixedImages) EnsureImage(_ context.Context, _ *v1.Pod, c *v1.Container, field string, _ *runtimeapi.PodSandboxConfig) (*runtimeapi.Image, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, field+"="+c.Image)
	if img := f.images[c.Image]; img != nil {
		return img, "", nil
	}
	return nil, "SignatureInvalid", errors.New("no valid signature")
}

func TestCustomImageManager(t *testing.T) {
	im := &fixedImages{images: map[string]*runtimeapi.Image{"mirror.test/app:1": {Id: "sha256:" + strings.Repeat("b", 64)}}}
	h := newHarness(t, fakecri.Config{Images: []string{"sha256:" + strings.Repeat("b", 64)}}, func(c *cri.Config) { c.Images = im })
	pod := testPod(v1.RestartPolicyAlways, nil, "good", "unsigned")
	pod.Spec.Containers[0].Image = "mirror.test/app:1"
	pod.Spec.Containers[1].Image = "elsewhere.test/app:1"
	res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
	if s := lastStep(res, "unsigned"); s == nil || s.Reason != "SignatureInvalid" || !strings.Contains(s.Message, "no valid signature") {
		t.Errorf("step for the unsigned container: %+v, want the manager's reason and error", s)
	}
	if s := lastStep(res, "good"); s == nil || s.Err != nil {
		t.Errorf("step for the good container: %+v, want it started", s)
	}
	h.rec.mu.Lock()
	var created string
	for _, cfg := range h.rec.configs {
		if cfg.GetMetadata().GetName() == "good" {
			created = cfg.GetImage().GetImage()
		}
	}
	h.rec.mu.Unlock()
	if created != "sha256:"+strings.Repeat("b", 64) {
		t.Errorf("good container created from %q, want the image ID the manager returned", created)
	}
	if strings.Join(im.asked, " ") != "spec.containers[good]=mirror.test/app:1 spec.containers[unsigned]=elsewhere.test/app:1" || h.pulls() != 0 {
		t.Errorf("manager asked %v, runtime pulled %d times: want the manager alone asked, naming each field", im.asked, h.pulls())
	}
}

// The image settings of Config reach the default image manager.
func TestImageSettingsReachTheManager(t *testing.T) {
	t.Run("ImagePullBackOff", func(t *testing.T) {
		h := newHarness(t, fakecri.Config{Registry: []string{}}, func(c *cri.Config) {
			c.ImagePullBackOff = cri.BackOff{Initial: time.Second, Max: time.Second}
		})
		pod := testPod(v1.RestartPolicyAlways, nil, "app")
		pod.Spec.Containers[0].Image = "registry.test/missing:1"
		for i, want := range []string{cri.ReasonErrImagePull, cri.ReasonImagePullBackOff, cri.ReasonErrImagePull} {
			if s := lastStep(h.rt.SyncPod(h.ctx, pod, h.status(pod)), "app"); s.Reason != want {
				t.Fatalf("sync %d: %s (%s), want %s", i+1, s.Reason, s.Message, want)
			}
			if i == 1 {
				h.clock.Step(time.Second)
			}
		}
	})
	t.Run("Objects", func(t *testing.T) {
		auth := base64.StdEncoding.EncodeToString([]byte("bob:hunter2"))
		secret := &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"registry.test": {"auth": "` + auth + `"}}}`)}}
		h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.Objects = objects{secrets: map[string]*v1.Secret{"ns/pull": secret}} })
		pod := testPod(v1.RestartPolicyAlways, nil, "app")
		pod.Spec.Containers[0].Image = "registry.test/app:1"
		pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "pull"}}
		h.sync(pod)
		h.rec.mu.Lock()
		defer h.rec.mu.Unlock()
		if len(h.rec.auths) != 1 || h.rec.auths[0].GetUsername() != "bob" {
			t.Errorf("pulled with %v, want bob's credentials", h.rec.auths)
		}
	})
	t.Run("ImagePullTimeout", func(t *testing.T) {
		h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.ImagePullTimeout = time.Minute })
		pod := testPod(v1.RestartPolicyAlways, nil, "app")
		pod.Annotations = map[string]string{fakecri.AnnotationPullDelay: "1h"}
		pod.Spec.Containers[0].Image = "nodekit.test/slow:1"
		done := make(chan string, 1)
		go func() { done <- lastStep(h.rt.SyncPod(context.Background(), pod, nil), "app").Message }()
		// fakecri's pull delay and the pull deadline both wait on the
		// same fake clock; a step of a minute ends only the deadline.
		waitForWaiters(t, h.clock, "the pull")
		h.clock.Step(time.Minute)
		if msg := receive(t, done, "SyncPod with a hung pull"); !strings.Contains(msg, "did not finish within 1m0s") {
			t.Errorf("message %q, want the pull cut off after 1m", msg)
		}
	})
	t.Run("MaxParallelImagePulls", func(t *testing.T) {
		if _, err := cri.New(cri.Config{RuntimeService: &fakecri.Runtime{}, ImageService: &fakecri.Runtime{}, MaxParallelImagePulls: -1}); err == nil || !strings.Contains(err.Error(), "MaxParallelImagePulls") {
			t.Errorf("New with -1 parallel pulls: %v, want an error naming the field", err)
		}
	})
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
