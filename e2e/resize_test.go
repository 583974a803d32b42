package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/cgroupfs"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
)

// cgroupString renders a cgroup's CPU shares, CFS quota and memory
// limit as "shares/quota/memory".
func cgroupString(t *testing.T, cg *cgroupfs.Manager, path string) string {
	t.Helper()
	r, err := cg.Get(path)
	if err != nil {
		t.Fatalf("read cgroup %s: %v", path, err)
	}
	v := func(p any) string {
		switch p := p.(type) {
		case *uint64:
			if p != nil {
				return fmt.Sprint(*p)
			}
		case *int64:
			if p != nil {
				return fmt.Sprint(*p)
			}
		}
		return "?"
	}
	return v(r.CPUShares) + "/" + v(r.CPUQuota) + "/" + v(r.MemoryLimit)
}

// TestResizeOnContainerd runs an agent that manages pod cgroups (its own
// CgroupRoot) on the e2e containerd: the pod's cgroup and its
// container's have the kubelet's settings; a resize changes both in
// place, the container running on without a restart; a resize that
// would lower the memory limit below what the pod uses fails with the
// kubelet's message and changes nothing; the pod's cgroup goes with it.
func TestResizeOnContainerd(t *testing.T) {
	image := env(t, "NODEKIT_E2E_IMAGE")
	cg, err := cgroupfs.New("/sys/fs/cgroup")
	if err != nil {
		t.Fatalf("cgroups: %v", err)
	}
	node := "e2e-resize"
	root := fmt.Sprintf("/nodekit-e2e-resize-%d", time.Now().UnixNano())
	api := podsource.NewChannel(podsource.SourceAPI, 4)
	// Registered first, so it runs last: after the agent stopped and the
	// pods are gone.
	t.Cleanup(func() {
		if err := cg.Remove(root); err != nil {
			t.Errorf("remove the test's cgroups: %v", err)
		}
	})
	a := limitsAgent(t, node, api, nil, func(c *cri.Config) { c.CgroupRoot = root + "/kubepods" })
	send := func(u podsource.Update) {
		t.Helper()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := api.Send(sctx, u); err != nil {
			t.Fatal(err)
		}
	}
	size := func(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
		return v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuReq), v1.ResourceMemory: resource.MustParse(memReq)},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuLim), v1.ResourceMemory: resource.MustParse(memLim)},
		}
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sized-" + node, Namespace: "e2e", UID: types.UID(fmt.Sprintf("sized-%d", time.Now().UnixNano())),
			Generation: 1, Annotations: map[string]string{podsource.AnnotationConfigSource: podsource.SourceAPI}},
		Spec: v1.PodSpec{
			NodeName: node, HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSDefault,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Volumes:                       []v1.Volume{{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}},
			Containers: []v1.Container{{
				Name: "app", Image: image, ImagePullPolicy: v1.PullIfNotPresent,
				// 40 MB in a memory-backed volume, charged to the pod.
				Command:                []string{"sh", "-c", "head -c 40000000 /dev/zero >/mem/fill; sleep 3600"},
				VolumeMounts:           []v1.VolumeMount{{Name: "mem", MountPath: "/mem"}},
				Resources:              size("100m", "200m", "64Mi", "128Mi"),
				TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile,
			}},
		},
	}
	send(podsource.Update{Op: podsource.SET})
	send(podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{pod}})
	p := waitPod(t, a, pod.Name, "app running", 90*time.Second, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	id := p.Status.ContainerStatuses[0].ContainerID
	podPath := root + "/kubepods/burstable/pod" + string(pod.UID)
	ctrPath := podPath + "/" + id[strings.Index(id, "://")+3:]
	if got, want := cgroupString(t, cg, podPath), "102/20000/134217728"; got != want {
		t.Errorf("pod cgroup %s: %s, want %s", podPath, got, want)
	}
	if got, want := cgroupString(t, cg, ctrPath), "102/20000/134217728"; got != want {
		t.Errorf("container cgroup %s: %s, want %s", ctrPath, got, want)
	}
	tier := root + "/kubepods/burstable"
	if got := cgroupString(t, cg, tier); !strings.HasPrefix(got, "102/") {
		t.Errorf("burstable tier %s: %s, want the pod's 102 shares", tier, got)
	}

	// Later specs come as the API sends them, with the pod Running.
	resized := pod.DeepCopy()
	resized.Status.Phase = v1.PodRunning
	resized.Generation = 2
	resized.Spec.Containers[0].Resources = size("300m", "400m", "64Mi", "256Mi")
	send(podsource.Update{Op: podsource.UPDATE, Pods: []*v1.Pod{resized}})
	p = waitPod(t, a, pod.Name, "app resized", 60*time.Second, func(p *v1.Pod) bool {
		c := p.Status.ContainerStatuses
		return len(c) == 1 && c[0].Resources != nil && c[0].Resources.Limits.Cpu().MilliValue() == 400 && !resizing(p)
	})
	if c := p.Status.ContainerStatuses[0]; c.ContainerID != id || c.RestartCount != 0 || c.State.Running == nil {
		t.Errorf("after the resize: container %s restarts %d state %+v, want %s running on", c.ContainerID, c.RestartCount, c.State, id)
	}
	if got, want := cgroupString(t, cg, podPath), "307/40000/268435456"; got != want {
		t.Errorf("resized pod cgroup: %s, want %s", got, want)
	}
	if got, want := cgroupString(t, cg, ctrPath), "307/40000/268435456"; got != want {
		t.Errorf("resized container cgroup: %s, want %s", got, want)
	}
	if got := cgroupString(t, cg, tier); !strings.HasPrefix(got, "307/") {
		t.Errorf("burstable tier after the resize: %s, want the pod's 307 shares", got)
	}

	// Once the 40 MB are written, a 16Mi limit is below the usage.
	waitPod(t, a, pod.Name, "the volume filled", 30*time.Second, func(*v1.Pod) bool {
		u, err := cg.MemoryUsage(podPath)
		return err == nil && u > 40000000
	})
	shrunk := resized.DeepCopy()
	shrunk.Generation = 3
	shrunk.Spec.Containers[0].Resources = size("300m", "400m", "16Mi", "16Mi")
	send(podsource.Update{Op: podsource.UPDATE, Pods: []*v1.Pod{shrunk}})
	p = waitPod(t, a, pod.Name, "the resize refused", 60*time.Second, func(p *v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodResizeInProgress && c.Reason == v1.PodReasonError {
				return true
			}
		}
		return false
	})
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodResizeInProgress && !strings.Contains(c.Message, "attempting to set pod memory limit (16777216) below current usage") {
			t.Errorf("PodResizeInProgress message %q, want the kubelet's", c.Message)
		}
	}
	if got, want := cgroupString(t, cg, podPath), "307/40000/268435456"; got != want {
		t.Errorf("pod cgroup after the refused resize: %s, want it unchanged, %s", got, want)
	}
	// Allocated, not carried out: the status shows both.
	if got := p.Status.AllocatedResources.Memory().String(); got != "16Mi" {
		t.Errorf("allocatedResources memory %s, want 16Mi", got)
	}
	if p.Status.Resources == nil || p.Status.Resources.Limits.Memory().String() != "256Mi" {
		t.Errorf("status.resources %+v, want the pod cgroup's 256Mi memory limit", p.Status.Resources)
	}

	send(podsource.Update{Op: podsource.REMOVE, Pods: []*v1.Pod{shrunk}})
	for deadline := time.Now().Add(60 * time.Second); cg.Exists(podPath); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pod cgroup %s still there 60s after the pod was removed", podPath)
		}
	}
}

// resizing reports whether the pod has a resize condition.
func resizing(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
			return true
		}
	}
	return false
}
