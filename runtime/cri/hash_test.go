package cri_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// kubeletHash is the kubelet v1.37 container hash, derived here from its
// definition independently of cri.HashContainer: the JSON of a map with
// the container's name and image is printed as a Go byte slice with its
// type, "([]uint8)[123 34 ...]", and that text is hashed with 32-bit
// FNV-1a.
func kubeletHash(t *testing.T, c *v1.Container) uint64 {
	t.Helper()
	b, err := json.Marshal(map[string]string{"name": c.Name, "image": c.Image})
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "([]uint8)%v", b)
	return uint64(h.Sum32())
}

func TestHashContainerIsTheKubelets(t *testing.T) {
	// The value the kubelet's own tests pin for this name and image.
	sample := &v1.Container{Name: "test_container", Image: "foo/image:v1", Command: []string{"/bin/testcmd"}}
	if got := cri.HashContainer(sample); got != 0x8e45cbd0 {
		t.Errorf("HashContainer(test_container, foo/image:v1) = %#x, want the kubelet's 0x8e45cbd0", got)
	}
	for _, c := range []v1.Container{
		{Name: "app", Image: "busybox:1.36"},
		{Name: "a", Image: ""},
		{Name: "web", Image: "registry.example:5000/team/web@sha256:0123456789abcdef"},
		{Name: "odd", Image: `we<ird>&"quoted"\path` + "\t\u00e9\u2028\xff"},
	} {
		if got, want := cri.HashContainer(&c), kubeletHash(t, &c); got != want {
			t.Errorf("HashContainer(%q, %q) = %#x, want %#x", c.Name, c.Image, got, want)
		}
	}
	// Fields other than the name and the image are left out.
	a := v1.Container{Name: "app", Image: "busybox:1.36"}
	b := a
	b.Args = []string{"--x"}
	b.Env = []v1.EnvVar{{Name: "A", Value: "1"}}
	b.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	if cri.HashContainer(&a) != cri.HashContainer(&b) {
		t.Error("HashContainer changed with fields the kubelet does not hash")
	}
}

// TestSpecHashIsStable pins SpecHash values, so containers created by
// an earlier nodekit are not restarted by a new one: requests and limits
// are left out of it (0xfcb9e287ef95db9b), and a container that records
// the hash earlier versions made with them (0x049c17e27d070daf) is not
// restarted while they are unchanged.
func TestSpecHashIsStable(t *testing.T) {
	c := v1.Container{Name: "app", Image: "busybox:1.36", Args: []string{"--x"}, Env: []v1.EnvVar{{Name: "A", Value: "1"}},
		Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("1024Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000m"), v1.ResourceMemory: resource.MustParse("1.5Gi"), "example.com/dev": resource.MustParse("2e3")},
		}}
	if got := cri.SpecHash(&c); got != 0xfcb9e287ef95db9b {
		t.Errorf("SpecHash = %#x, want 0xfcb9e287ef95db9b", got)
	}
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0] = c
	st := ctr(pod, "app", running, 0)
	st.Hash, st.Annotations = kubeletHash(t, &c), map[string]string{cri.AnnotationSpecHash: "49c17e27d070daf"}
	obs := observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{st}}
	if got := cri.ComputePodActions(pod, obs.status(), nil); len(got.ContainersToKill) != 0 {
		t.Errorf("a container recording the earlier SpecHash of its unchanged spec is restarted: %+v", got)
	}
	d := v1.Container{Name: "app", Image: "busybox:1.36"}
	if got := cri.SpecHash(&d); got != 0x51b5fe882a1f319b {
		t.Errorf("SpecHash = %#x, want 0x51b5fe882a1f319b", got)
	}
}

// TestSpecChangeDetection covers which recorded hashes make a running
// container count as changed.
func TestSpecChangeDetection(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	c := &pod.Spec.Containers[0]
	c.Args = []string{"--new"}
	old := *c
	old.Args = []string{"--old"}
	hex := func(v uint64) string { return strconv.FormatUint(v, 16) }
	for _, tc := range []struct {
		name        string
		hash        uint64
		annotations map[string]string
		changed     bool
	}{
		{name: "created by a kubelet from the same name and image", hash: kubeletHash(t, c)},
		{name: "created by a kubelet from another image", hash: kubeletHash(t, &v1.Container{Name: "app", Image: "busybox:1.35"}), changed: true},
		{name: "created by nodekit from the same spec", hash: kubeletHash(t, c), annotations: map[string]string{cri.AnnotationSpecHash: hex(cri.SpecHash(c))}},
		{name: "created by nodekit from other args", hash: kubeletHash(t, c), annotations: map[string]string{cri.AnnotationSpecHash: hex(cri.SpecHash(&old))}, changed: true},
		{name: "created by nodekit, unreadable spec hash", hash: kubeletHash(t, c), annotations: map[string]string{cri.AnnotationSpecHash: "zz"}, changed: true},
		{name: "created by an earlier nodekit from the same spec", hash: cri.SpecHash(c)},
		{name: "created by an earlier nodekit from other args", hash: cri.SpecHash(&old), changed: true},
		{name: "no hash recorded", hash: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ctr(pod, "app", running, 0)
			st.Hash, st.Annotations = tc.hash, tc.annotations
			obs := observed{[]*runtime.SandboxStatus{readySandbox(0)}, []*runtime.ContainerStatus{st}}
			got := cri.ComputePodActions(pod, obs.status(), nil)
			if changed := len(got.ContainersToKill) == 1 && got.ContainersToKill[0].Message == "Container app definition changed, will be restarted"; changed != tc.changed {
				t.Errorf("actions %+v, want changed=%v", got, tc.changed)
			}
		})
	}
}

// TestKubeletContainerIsAdopted creates a pod's sandbox and container on
// the runtime as a kubelet v1.37 would, with its labels, annotations and
// hash, and checks that a sync of the same pod leaves them running.
func TestKubeletContainerIsAdopted(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	grace := int64(30)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	c := &pod.Spec.Containers[0]
	c.Args = []string{"--serve"}
	c.Env = []v1.EnvVar{{Name: "A", Value: "1"}}
	c.TerminationMessagePath = "/dev/termination-log"
	c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	podLabels := map[string]string{
		"io.kubernetes.pod.name": pod.Name, "io.kubernetes.pod.namespace": pod.Namespace, "io.kubernetes.pod.uid": string(pod.UID),
	}
	sb, err := h.fake.RunPodSandbox(h.ctx, &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		Labels:       podLabels,
		LogDirectory: h.logs,
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"io.kubernetes.container.name": c.Name}
	for k, v := range podLabels {
		labels[k] = v
	}
	id, err := h.fake.CreateContainer(h.ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
		Image:    &runtimeapi.ImageSpec{Image: c.Image},
		Args:     c.Args,
		Envs:     []*runtimeapi.KeyValue{{Key: "A", Value: []byte("1")}},
		Labels:   labels,
		Annotations: map[string]string{
			"io.kubernetes.container.hash":                     strconv.FormatUint(kubeletHash(t, c), 16),
			"io.kubernetes.container.restartCount":             "0",
			"io.kubernetes.container.terminationMessagePath":   c.TerminationMessagePath,
			"io.kubernetes.container.terminationMessagePolicy": string(c.TerminationMessagePolicy),
			"io.kubernetes.pod.terminationGracePeriod":         "30",
		},
		LogPath: "app/0.log",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.fake.StartContainer(h.ctx, id); err != nil {
		t.Fatal(err)
	}

	h.fake.ResetCalls()
	res := h.sync(pod)
	if len(res.Steps) != 0 {
		t.Errorf("sync of the kubelet's pod: steps %v, want none", steps(res))
	}
	for _, call := range h.fake.Calls() {
		if call == "StopContainer" || call == "CreateContainer" || call == "RunPodSandbox" {
			t.Errorf("sync of the kubelet's pod called %s; calls %v", call, h.fake.Calls())
		}
	}
	if diff := cmp.Diff(map[string]string{"app": "running/0/0"}, states(h.status(pod))); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}

	// The image changes: the kubelet's hash differs, the container is
	// replaced, and the new one carries both hashes.
	c.Image = "busybox:1.37"
	res = h.sync(pod)
	if diff := cmp.Diff([]string{"KillContainer app", "StartContainer app"}, steps(res)); diff != "" {
		t.Fatalf("steps after an image change (-want +got):\n%s", diff)
	}
	a := h.rec.config("app").GetAnnotations()
	if a[cri.AnnotationContainerHash] != strconv.FormatUint(kubeletHash(t, c), 16) || a[cri.AnnotationSpecHash] != strconv.FormatUint(cri.SpecHash(c), 16) {
		t.Errorf("annotations %v, want the kubelet's hash %x and SpecHash %x", a, kubeletHash(t, c), cri.SpecHash(c))
	}
}
