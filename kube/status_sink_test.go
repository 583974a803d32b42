package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/podsource"
)

// sourced returns p as the PodSource sends it.
func sourced(p *v1.Pod) *v1.Pod {
	p = p.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[podsource.AnnotationConfigSource] = podsource.SourceAPI
	return p
}

func running(ip string) v1.PodStatus {
	return v1.PodStatus{
		Phase: v1.PodRunning,
		PodIP: ip,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue},
		},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 2}},
	}
}

func newSink(t *testing.T, client *fake.Clientset) *kube.StatusSink {
	t.Helper()
	s, err := kube.NewStatusSink(kube.StatusSinkConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func podStatus(t *testing.T, client *fake.Clientset, name string) v1.PodStatus {
	t.Helper()
	p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Status
}

// TestStatusSinkPatchesOnlyChanges checks that a status is patched through
// the status subresource, and that the same status again is skipped.
func TestStatusSinkPatchesOnlyChanges(t *testing.T) {
	pod := apiPod("default", "web", "u1", "n1", 0)
	client := fake.NewClientset(pod)
	s := newSink(t, client)
	ctx := context.Background()
	if err := s.UpdatePodStatus(ctx, sourced(pod), running("10.0.0.5")); err != nil {
		t.Fatal(err)
	}
	got := podStatus(t, client, "web")
	if got.Phase != v1.PodRunning || got.PodIP != "10.0.0.5" || got.ContainerStatuses[0].RestartCount != 2 {
		t.Fatalf("status after the patch = %+v", got)
	}
	if d := cmp.Diff([]v1.PodIP{{IP: "10.0.0.5"}}, got.PodIPs); d != "" {
		t.Fatalf("podIPs, filled from podIP as the API server does (-want +got):\n%s", d)
	}
	if err := s.UpdatePodStatus(ctx, sourced(pod), running("10.0.0.5")); err != nil {
		t.Fatal(err)
	}
	if s.Patched() != 1 || s.Skipped() != 1 {
		t.Fatalf("patched %d skipped %d; want 1 and 1", s.Patched(), s.Skipped())
	}
	patches := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			patches++
			if a.GetSubresource() != "status" {
				t.Errorf("patch of subresource %q, want status", a.GetSubresource())
			}
			if p := string(a.(k8stesting.PatchAction).GetPatch()); !strings.Contains(p, `"uid":"u1"`) {
				t.Errorf("patch %s carries no uid", p)
			}
		}
	}
	if patches != 1 {
		t.Fatalf("%d patches, want 1", patches)
	}
}

// TestStatusSinkMergeRules checks the kubelet's merge rules: a terminal
// phase stays, conditions owned by others stay, nominatedNodeName stays.
func TestStatusSinkMergeRules(t *testing.T) {
	pod := apiPod("default", "job", "u1", "n1", 0)
	pod.Status = v1.PodStatus{
		Phase:             v1.PodSucceeded,
		QOSClass:          v1.PodQOSBestEffort,
		NominatedNodeName: "n9",
		Conditions: []v1.PodCondition{
			{Type: "example.com/gate", Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: v1.ConditionFalse},
		},
	}
	client := fake.NewClientset(pod)
	s := newSink(t, client)
	if err := s.UpdatePodStatus(context.Background(), sourced(pod), running("10.0.0.6")); err != nil {
		t.Fatal(err)
	}
	got := podStatus(t, client, "job")
	if got.Phase != v1.PodSucceeded {
		t.Errorf("phase = %s; a terminal phase must stay", got.Phase)
	}
	if got.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("qosClass = %q; the API's must stay when the status has none", got.QOSClass)
	}
	if got.NominatedNodeName != "n9" {
		t.Errorf("nominatedNodeName = %q; the API's must stay", got.NominatedNodeName)
	}
	conds := map[v1.PodConditionType]v1.ConditionStatus{}
	for _, c := range got.Conditions {
		conds[c.Type] = c.Status
	}
	// The phase stays terminal, so the node's readiness does not show.
	want := map[v1.PodConditionType]v1.ConditionStatus{"example.com/gate": v1.ConditionTrue, v1.PodReady: v1.ConditionFalse, v1.ContainersReady: v1.ConditionFalse}
	if d := cmp.Diff(want, conds); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
}

// TestStatusSinkSkips checks what is not written: a pod not from the API
// server, a pod gone, a pod replaced by another of the same name.
func TestStatusSinkSkips(t *testing.T) {
	pod := apiPod("default", "web", "u1", "n1", 0)
	client := fake.NewClientset(pod)
	s := newSink(t, client)
	ctx := context.Background()
	if err := s.UpdatePodStatus(ctx, pod, running("10.0.0.5")); err != nil {
		t.Fatalf("static pod: %v", err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Fatalf("a pod not from the API server made %d calls", n)
	}
	if err := s.UpdatePodStatus(ctx, sourced(apiPod("default", "gone", "u2", "n1", 0)), running("10.0.0.5")); err != nil {
		t.Fatalf("pod gone: %v", err)
	}
	if err := s.UpdatePodStatus(ctx, sourced(apiPod("default", "web", "old-uid", "n1", 0)), running("10.0.0.5")); err != nil {
		t.Fatalf("pod replaced: %v", err)
	}
	if s.Patched() != 0 {
		t.Fatalf("patched %d, want 0", s.Patched())
	}
	if got := podStatus(t, client, "web"); got.Phase != "" {
		t.Fatalf("the new pod of the same name got the old pod's status: %+v", got)
	}
}

// TestStatusSinkError checks that an API server error is returned (the
// status.Manager retries it).
func TestStatusSinkError(t *testing.T) {
	pod := apiPod("default", "web", "u1", "n1", 0)
	client := fake.NewClientset(pod)
	client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	err := newSink(t, client).UpdatePodStatus(context.Background(), sourced(pod), running("10.0.0.5"))
	if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "default/web") {
		t.Fatalf("err = %v; want ServiceUnavailable naming default/web", err)
	}
}

// TestStatusSinkOwnsAllContainersRestarting checks that the node's
// AllContainersRestarting replaces the API's, as the kubelet owns it: a
// True written while all containers restart turns False with the next
// status, and is dropped when the node's status no longer has it.
func TestStatusSinkOwnsAllContainersRestarting(t *testing.T) {
	pod := apiPod("default", "web", "u1", "n1", 0)
	client := fake.NewClientset(pod)
	s := newSink(t, client)
	ctx := context.Background()
	with := func(st v1.ConditionStatus) v1.PodStatus {
		r := running("10.0.0.5")
		r.Conditions = append(r.Conditions, v1.PodCondition{Type: v1.AllContainersRestarting, Status: st})
		return r
	}
	conds := func() map[v1.PodConditionType]v1.ConditionStatus {
		out := map[v1.PodConditionType]v1.ConditionStatus{}
		for _, c := range podStatus(t, client, "web").Conditions {
			out[c.Type] = c.Status
		}
		return out
	}
	for i, tc := range []struct {
		status v1.PodStatus
		want   v1.ConditionStatus // "" for absent
	}{
		{with(v1.ConditionTrue), v1.ConditionTrue},
		{with(v1.ConditionFalse), v1.ConditionFalse},
		{running("10.0.0.5"), ""},
	} {
		if err := s.UpdatePodStatus(ctx, sourced(pod), tc.status); err != nil {
			t.Fatal(err)
		}
		if got := conds()[v1.AllContainersRestarting]; got != tc.want {
			t.Errorf("status %d: AllContainersRestarting %q in the API, want %q", i, got, tc.want)
		}
	}
}

// TestStatusSinkWritesResources checks that the resources the node
// reports reach the API server: the pod's resources and
// allocatedResources, and each container's resources, allocatedResources
// and user; a figure that goes away is removed; and an empty report (a
// pod without resources) is not patched again and again.
func TestStatusSinkWritesResources(t *testing.T) {
	pod := apiPod("default", "web", "u1", "n1", 0)
	client := fake.NewClientset(pod)
	s := newSink(t, client)
	ctx := context.Background()
	q := resource.MustParse
	st := running("10.0.0.5")
	st.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("500m"), "memory": q("64Mi")}, Limits: v1.ResourceList{"cpu": q("1")}}
	st.AllocatedResources = v1.ResourceList{"cpu": q("500m"), "memory": q("64Mi")}
	st.ContainerStatuses[0].Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("250m")}, Limits: v1.ResourceList{"memory": q("128Mi")}}
	st.ContainerStatuses[0].AllocatedResources = v1.ResourceList{"cpu": q("250m")}
	st.ContainerStatuses[0].User = &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}
	if err := s.UpdatePodStatus(ctx, sourced(pod), st); err != nil {
		t.Fatal(err)
	}
	got := podStatus(t, client, "web")
	if !equality.Semantic.DeepEqual(got.Resources, st.Resources) || !equality.Semantic.DeepEqual(got.AllocatedResources, st.AllocatedResources) {
		t.Errorf("pod resources %v allocated %v, want %v and %v", got.Resources, got.AllocatedResources, st.Resources, st.AllocatedResources)
	}
	if !equality.Semantic.DeepEqual(got.ContainerStatuses, st.ContainerStatuses) {
		t.Errorf("container statuses %+v\nwant %+v", got.ContainerStatuses, st.ContainerStatuses)
	}

	// Everything goes: what is left is empty, as for a pod without resources.
	empty := running("10.0.0.5")
	empty.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	empty.AllocatedResources = v1.ResourceList{}
	empty.ContainerStatuses[0].Resources = &v1.ResourceRequirements{}
	for range 2 {
		if err := s.UpdatePodStatus(ctx, sourced(pod), empty); err != nil {
			t.Fatal(err)
		}
	}
	got = podStatus(t, client, "web")
	if got.Resources == nil || len(got.Resources.Requests)+len(got.Resources.Limits)+len(got.AllocatedResources) != 0 {
		t.Errorf("pod resources %v allocated %v, want empty", got.Resources, got.AllocatedResources)
	}
	cs := got.ContainerStatuses[0]
	if cs.Resources == nil || len(cs.Resources.Requests)+len(cs.Resources.Limits)+len(cs.AllocatedResources) != 0 || cs.User != nil {
		t.Errorf("container resources %v allocated %v user %v, want empty resources and nothing else", cs.Resources, cs.AllocatedResources, cs.User)
	}
	if s.Patched() != 2 || s.Skipped() != 1 {
		t.Errorf("patched %d, skipped %d; want 2 and 1: an empty report is written once", s.Patched(), s.Skipped())
	}
}

// A status made from an older spec than the one whose generation the API
// already records does not take observedGeneration back; a newer one
// moves it on.
func TestStatusSinkKeepsTheNewestObservedGeneration(t *testing.T) {
	pod := apiPod("default", "web", "u1", "n1", 0)
	pod.Status.ObservedGeneration = 5
	client := fake.NewClientset(pod)
	s := newSink(t, client)
	for _, tc := range []struct{ sent, want int64 }{{3, 5}, {6, 6}} {
		st := running("10.0.0.5")
		st.ObservedGeneration = tc.sent
		if err := s.UpdatePodStatus(context.Background(), sourced(pod), st); err != nil {
			t.Fatal(err)
		}
		if got := podStatus(t, client, "web").ObservedGeneration; got != tc.want {
			t.Errorf("sent observedGeneration %d: the API has %d, want %d", tc.sent, got, tc.want)
		}
	}
}

// TestStatusSinkNeverWritesATerminalPodReady: a terminal phase goes to
// the API server with PodReady and ContainersReady false, whatever the
// node's readiness said, with the kubelet's reasons and a transition at
// the sink's clock; a readiness already false keeps its transition time.
func TestStatusSinkNeverWritesATerminalPodReady(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 500, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour).Truncate(time.Second))
	for _, tc := range []struct {
		phase  v1.PodPhase
		reason string
	}{{v1.PodFailed, "PodFailed"}, {v1.PodSucceeded, "PodCompleted"}} {
		pod := apiPod("default", "p", "u1", "n1", 0)
		pod.Status = v1.PodStatus{Phase: v1.PodRunning}
		client := fake.NewClientset(pod)
		s, err := kube.NewStatusSink(kube.StatusSinkConfig{Client: client, Clock: clocktesting.NewFakeClock(now)})
		if err != nil {
			t.Fatal(err)
		}
		st := running("10.0.0.6")
		st.Phase = tc.phase
		st.Conditions[1] = v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, LastTransitionTime: earlier}
		if err := s.UpdatePodStatus(context.Background(), sourced(pod), st); err != nil {
			t.Fatal(err)
		}
		got := podStatus(t, client, "p")
		if got.Phase != tc.phase {
			t.Fatalf("phase %s, want %s", got.Phase, tc.phase)
		}
		want := map[v1.PodConditionType]v1.PodCondition{
			v1.PodReady:        {Type: v1.PodReady, Status: v1.ConditionFalse, Reason: tc.reason, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))},
			v1.ContainersReady: {Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: tc.reason, LastTransitionTime: earlier},
		}
		for _, c := range got.Conditions {
			w, ok := want[c.Type]
			if !ok {
				t.Errorf("%s: unexpected condition %+v", tc.phase, c)
				continue
			}
			delete(want, c.Type)
			if d := cmp.Diff(w, c); d != "" {
				t.Errorf("%s: condition %s (-want +got):\n%s", tc.phase, c.Type, d)
			}
		}
		if len(want) > 0 {
			t.Errorf("%s: conditions missing: %v", tc.phase, want)
		}
	}
}

// TestStatusSinkKeepsTheClaimsStatuses: the statuses of a pod's resource
// claims are not the node's to write (NodeRestriction refuses a node that
// changes them); a node's status leaves the API's as they are.
func TestStatusSinkKeepsTheClaimsStatuses(t *testing.T) {
	pod := apiPod("default", "p", "u1", "n1", 0)
	pod.Status = v1.PodStatus{
		Phase:                 v1.PodPending,
		ResourceClaimStatuses: []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu")}},
		ExtendedResourceClaimStatus: &v1.PodExtendedResourceClaimStatus{
			ResourceClaimName: "p-extended",
			RequestMappings:   []v1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: "example.com/gpu", RequestName: "r0"}},
		},
		NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{{ResourceClaimName: "p-cpu"}},
	}
	client := fake.NewClientset(pod)
	s := newSink(t, client)
	if err := s.UpdatePodStatus(context.Background(), sourced(pod), running("10.0.0.6")); err != nil {
		t.Fatal(err)
	}
	got := podStatus(t, client, "p")
	if got.Phase != v1.PodRunning {
		t.Fatalf("phase %s, want Running: the status was not written", got.Phase)
	}
	if d := cmp.Diff(pod.Status.ResourceClaimStatuses, got.ResourceClaimStatuses); d != "" {
		t.Errorf("resourceClaimStatuses (-want +got):\n%s", d)
	}
	if d := cmp.Diff(pod.Status.ExtendedResourceClaimStatus, got.ExtendedResourceClaimStatus); d != "" {
		t.Errorf("extendedResourceClaimStatus (-want +got):\n%s", d)
	}
	if d := cmp.Diff(pod.Status.NodeAllocatableResourceClaimStatuses, got.NodeAllocatableResourceClaimStatuses); d != "" {
		t.Errorf("nodeAllocatableResourceClaimStatuses (-want +got):\n%s", d)
	}
}
