package cri_test

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime/fakecri"
)

// lastSandbox is the config of the newest RunPodSandbox call.
func (h *harness) lastSandbox() *runtimeapi.PodSandboxConfig {
	h.t.Helper()
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	if len(h.rec.sandboxes) == 0 {
		h.t.Fatal("no sandbox was created")
	}
	return h.rec.sandboxes[len(h.rec.sandboxes)-1]
}

func TestSandboxHostnameIsCutTo63Characters(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b" + strings.Repeat("c", 10) // 74 characters, a '-' at index 62
	for _, tc := range []struct {
		name string
		edit func(*v1.Pod)
		want string
	}{
		{"short pod name", func(p *v1.Pod) {}, "p"},
		{"long pod name", func(p *v1.Pod) { p.Name = long }, strings.Repeat("a", 62)},
		{"pod name of exactly 63", func(p *v1.Pod) { p.Name = strings.Repeat("x", 63) }, strings.Repeat("x", 63)},
		{"long name cut after dashes", func(p *v1.Pod) { p.Name = strings.Repeat("d", 60) + "---zz" }, strings.Repeat("d", 60)},
		{"long name cut after a dot", func(p *v1.Pod) { p.Name = strings.Repeat("d", 62) + ".zz" }, strings.Repeat("d", 62)},
		{"spec.hostname wins", func(p *v1.Pod) { p.Name = long; p.Spec.Hostname = "web" }, "web"},
		{"spec.hostnameOverride wins and is cut", func(p *v1.Pod) {
			p.Spec.Hostname = "web"
			p.Spec.HostnameOverride = ptr.To(strings.Repeat("o", 62) + ".example")
		}, strings.Repeat("o", 62)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fakecri.Config{})
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			tc.edit(pod)
			h.sync(pod)
			if got := h.lastSandbox().GetHostname(); got != tc.want {
				t.Errorf("sandbox hostname %q (%d characters), want %q", got, len(got), tc.want)
			}
		})
	}
}

func TestSandboxHostnameThatCutsToNothingIsAnError(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.HostnameOverride = ptr.To(strings.Repeat("-", 70))
	res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
	err := res.Error()
	if err == nil || !strings.Contains(err.Error(), "spec.hostnameOverride") || !strings.Contains(err.Error(), "ns/p") {
		t.Fatalf("SyncPod error %v, want one naming the pod and spec.hostnameOverride", err)
	}
}

func TestSandboxIsPrivilegedWhenAnyContainerIs(t *testing.T) {
	privileged := &v1.SecurityContext{Privileged: ptr.To(true)}
	for _, tc := range []struct {
		name string
		edit func(*v1.Pod)
		want bool
	}{
		{"no security context", func(p *v1.Pod) {}, false},
		{"privileged false", func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(false)}
		}, false},
		{"regular container", func(p *v1.Pod) { p.Spec.Containers[1].SecurityContext = privileged }, true},
		{"init container", func(p *v1.Pod) { p.Spec.InitContainers[0].SecurityContext = privileged }, true},
		{"ephemeral container", func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox:1.36", SecurityContext: privileged,
			}}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fakecri.Config{})
			pod := testPod(v1.RestartPolicyAlways, []string{"init"}, "app", "side")
			withEnv(&pod.Spec.InitContainers[0], fakecri.EnvExitCode, "0")
			tc.edit(pod)
			h.sync(pod)
			if got := h.lastSandbox().GetLinux().GetSecurityContext().GetPrivileged(); got != tc.want {
				t.Errorf("sandbox privileged = %v, want %v", got, tc.want)
			}
		})
	}
}
