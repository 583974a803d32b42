package status_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// list renders a resource list as "cpu=100m memory=64Mi", sorted; "nil"
// for a nil list and "{}" for an empty one.
func list(l v1.ResourceList) string {
	if l == nil {
		return "nil"
	}
	if len(l) == 0 {
		return "{}"
	}
	var parts []string
	for name, q := range l {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// reqs renders resource requirements as "requests ...; limits ...",
// "nil" for none.
func reqs(r *v1.ResourceRequirements) string {
	if r == nil {
		return "nil"
	}
	return "requests " + list(r.Requests) + "; limits " + list(r.Limits)
}

func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// resourced is a pod whose container "app" requests 100m CPU and 64Mi and
// is limited to 200m and 128Mi.
func resourced() *v1.Pod {
	p := pod(v1.RestartPolicyAlways, nil, "app")
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: rl("cpu", "100m", "memory", "64Mi"),
		Limits:   rl("cpu", "200m", "memory", "128Mi"),
	}
	return p
}

func withResources(cs *runtime.ContainerStatus, r *runtime.ContainerResources) *runtime.ContainerStatus {
	cs.Resources = r
	return cs
}

const specResources = "requests cpu=100m memory=64Mi; limits cpu=200m memory=128Mi"

// A container status made from a runtime instance reports resources as
// the kubelet does: the spec's when the container does not run, the
// runtime's CPU and memory figures in their place when it runs (the spec's
// below the cgroup floors), and allocatedResources, the spec's requests.
func TestContainerStatusResources(t *testing.T) {
	created := runtime.ContainerStateCreated
	reported := &runtime.ContainerResources{CPURequest: qty("150m"), CPULimit: qty("300m"), MemoryLimit: qty("256Mi")}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		cs   *runtime.ContainerStatus
		want string
	}{
		{"created, waiting: the spec's", resourced(), withResources(c("app", created, 0, 0), reported), specResources},
		{"exited: the spec's", resourced(), withResources(c("app", exited, 1, 0), reported), specResources},
		{"running: the runtime's", resourced(), withResources(c("app", running, 0, 0), reported),
			"requests cpu=150m memory=64Mi; limits cpu=300m memory=256Mi"},
		{"running, only a memory figure: the spec's CPU", resourced(), withResources(c("app", running, 0, 0), &runtime.ContainerResources{MemoryLimit: qty("96Mi")}),
			"requests cpu=100m memory=64Mi; limits cpu=200m memory=96Mi"},
		{"running, at the floors on both sides: the spec's", func() *v1.Pod {
			p := resourced()
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1m")
			p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("5m")
			return p
		}(), withResources(c("app", running, 0, 0), &runtime.ContainerResources{CPURequest: qty("2m"), CPULimit: qty("10m")}),
			"requests cpu=1m memory=64Mi; limits cpu=5m memory=128Mi"},
		{"running, above the floors on the runtime's side", func() *v1.Pod {
			p := resourced()
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1m")
			p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("5m")
			return p
		}(), withResources(c("app", running, 0, 0), &runtime.ContainerResources{CPURequest: qty("3m"), CPULimit: qty("11m")}),
			"requests cpu=3m memory=64Mi; limits cpu=11m memory=128Mi"},
		{"running, above the floors on the spec's side", func() *v1.Pod {
			p := resourced()
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("3m")
			p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("11m")
			return p
		}(), withResources(c("app", running, 0, 0), &runtime.ContainerResources{CPURequest: qty("2m"), CPULimit: qty("10m")}),
			"requests cpu=2m memory=64Mi; limits cpu=10m memory=128Mi"},
		{"running, spec without limits: only the request is the runtime's", func() *v1.Pod {
			p := resourced()
			p.Spec.Containers[0].Resources.Limits = nil
			return p
		}(), withResources(c("app", running, 0, 0), reported), "requests cpu=150m memory=64Mi; limits nil"},
		{"running, spec limits memory only: the runtime's CPU limit is added", func() *v1.Pod {
			p := resourced()
			delete(p.Spec.Containers[0].Resources.Limits, v1.ResourceCPU)
			return p
		}(), withResources(c("app", running, 0, 0), reported), "requests cpu=150m memory=64Mi; limits cpu=300m memory=256Mi"},
		{"running, no resources reported: the spec's", resourced(), c("app", running, 0, 0), specResources},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.Generate(status.Input{Pod: tc.pod, Runtime: observed(tc.cs), Now: now})
			st := s.ContainerStatuses[0]
			if got := reqs(st.Resources); got != tc.want {
				t.Errorf("resources %s\nwant      %s", got, tc.want)
			}
			if got, want := list(st.AllocatedResources), list(tc.pod.Spec.Containers[0].Resources.Requests); got != want {
				t.Errorf("allocatedResources %s, want the spec's requests %s", got, want)
			}
		})
	}
}

// A running container whose runtime reports no resources keeps what the
// previous status reported for that same running container, figure by
// figure; otherwise it reports the spec's.
func TestContainerStatusResourcesKeptWhenTheRuntimeReportsNone(t *testing.T) {
	prevRes := &v1.ResourceRequirements{
		Requests: rl("cpu", "120m", "memory", "80Mi"),
		Limits:   rl("cpu", "240m"),
	}
	previous := func(id string, state v1.ContainerState) *v1.PodStatus {
		return &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app", ContainerID: id, State: state, Resources: prevRes}}}
	}
	runningState := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	cs := c("app", running, 0, 0)
	for _, tc := range []struct {
		name     string
		reported *runtime.ContainerResources
		prev     *v1.PodStatus
		want     string
	}{
		{"same running container", nil, previous(cs.ID.String(), runningState),
			"requests cpu=120m memory=80Mi; limits cpu=240m memory=128Mi"},
		{"same running container, memory reported", &runtime.ContainerResources{MemoryLimit: qty("100Mi")}, previous(cs.ID.String(), runningState),
			"requests cpu=120m memory=80Mi; limits cpu=240m memory=100Mi"},
		{"another container", nil, previous("fake://other", runningState), specResources},
		{"was not running", nil, previous(cs.ID.String(), v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}), specResources},
		{"no previous status", nil, nil, specResources},
		{"previous status without resources", nil, &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app", ContainerID: cs.ID.String(), State: runningState}}}, specResources},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := resourced()
			s := status.Generate(status.Input{Pod: p, Runtime: observed(withResources(c("app", running, 0, 0), tc.reported)), Previous: tc.prev, Now: now})
			if got := reqs(s.ContainerStatuses[0].Resources); got != tc.want {
				t.Errorf("resources %s\nwant      %s", got, tc.want)
			}
		})
	}
}

// The user is the one the runtime reports, on init, regular and
// ephemeral containers alike, and resources are reported on all three; a
// container not created yet reports none of them.
func TestContainerStatusUserAndLists(t *testing.T) {
	p := resourced()
	p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "img", Resources: v1.ResourceRequirements{Requests: rl("cpu", "50m")}}}
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "later", Image: "img"})
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "img"}}}
	user := &runtime.ContainerUser{Linux: &runtime.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}
	app := c("app", running, 0, 0)
	app.User = user
	debug := c("debug", running, 0, 0)
	debug.User = &runtime.ContainerUser{}
	obs := observed(app, c("init", exited, 0, 0), debug)
	s := status.Generate(status.Input{Pod: p, Runtime: obs, Now: now})

	want := &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}
	if diff := cmp.Diff(want, s.ContainerStatuses[0].User); diff != "" {
		t.Errorf("app's user (-want +got):\n%s", diff)
	}
	user.Linux.SupplementalGroups[0] = 7 // the status has its own copy
	if got := s.ContainerStatuses[0].User.Linux.SupplementalGroups[0]; got != 3000 {
		t.Errorf("the status shares the runtime's groups: %d", got)
	}
	if got := s.EphemeralContainerStatuses[0].User; got == nil || got.Linux != nil {
		t.Errorf("debug's user %+v, want an empty user, as reported", got)
	}
	if got := s.InitContainerStatuses[0].User; got != nil {
		t.Errorf("init's user %+v, want nil: the runtime reported none", got)
	}
	if got := reqs(s.InitContainerStatuses[0].Resources); got != "requests cpu=50m; limits nil" {
		t.Errorf("init's resources %s", got)
	}
	if got := list(s.InitContainerStatuses[0].AllocatedResources); got != "cpu=50m" {
		t.Errorf("init's allocatedResources %s", got)
	}
	if got := s.EphemeralContainerStatuses[0]; got.Resources == nil || got.Resources.Requests != nil || got.Resources.Limits != nil || got.AllocatedResources != nil {
		t.Errorf("debug's resources %s allocated %s, want empty resources and no allocation", reqs(got.Resources), list(got.AllocatedResources))
	}
	later := s.ContainerStatuses[1]
	if later.State.Waiting == nil || later.Resources != nil || later.AllocatedResources != nil || later.User != nil {
		t.Errorf("a container not created yet reports resources %s, allocated %s, user %+v; want none", reqs(later.Resources), list(later.AllocatedResources), later.User)
	}
}

// The pod's status.resources and allocatedResources are its effective
// requests and limits: the pod-level ones where set, else the
// containers' aggregated, with overhead, whatever the phase; a pod
// without resources reports empty ones, as the kubelet does.
func TestPodStatusResources(t *testing.T) {
	for _, tc := range []struct {
		name          string
		pod           func() *v1.Pod
		obs           *runtime.PodStatus
		wantResources string
		wantAllocated string
	}{
		{"pod-level resources", func() *v1.Pod {
			p := resourced()
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "256Mi"), Limits: rl("cpu", "1", "memory", "512Mi")}
			return p
		}, observed(c("app", running, 0, 0)), "requests cpu=500m memory=256Mi; limits cpu=1 memory=512Mi", "cpu=500m memory=256Mi"},
		{"pod-level requests only, pending", func() *v1.Pod {
			p := resourced()
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "500m")}
			return p
		}, observed(), "requests cpu=500m memory=64Mi; limits cpu=200m memory=128Mi", "cpu=500m memory=64Mi"},
		{"containers only, with a sidecar and overhead", func() *v1.Pod {
			p := resourced()
			always := v1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "img", RestartPolicy: &always,
				Resources: v1.ResourceRequirements{Requests: rl("cpu", "50m"), Limits: rl("cpu", "50m")}}}
			p.Spec.Overhead = rl("cpu", "10m", "memory", "1Mi")
			return p
		}, observed(c("app", running, 0, 0)), "requests cpu=160m memory=65Mi; limits cpu=260m memory=129Mi", "cpu=160m memory=65Mi"},
		{"no resources", func() *v1.Pod { return pod(v1.RestartPolicyAlways, nil, "app") }, observed(c("app", running, 0, 0)), "requests {}; limits {}", "{}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pod()
			s := status.Generate(status.Input{Pod: p, Runtime: tc.obs, Now: now})
			if got := reqs(s.Resources); got != tc.wantResources {
				t.Errorf("resources %s\nwant      %s", got, tc.wantResources)
			}
			if got := list(s.AllocatedResources); got != tc.wantAllocated {
				t.Errorf("allocatedResources %s, want %s", got, tc.wantAllocated)
			}
		})
	}
}

// A pod without any resources goes to an API server with empty
// resources on the pod and on each container that has an instance, and
// no allocatedResources, exactly as the kubelet's status serializes.
func TestStatusWithoutResourcesSerializes(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, nil, "app", "later")
	s := status.Generate(status.Input{Pod: p, Runtime: observed(c("app", running, 0, 0)), Now: now})
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Resources          *json.RawMessage `json:"resources"`
		AllocatedResources *json.RawMessage `json:"allocatedResources"`
		ContainerStatuses  []struct {
			Name               string           `json:"name"`
			Resources          *json.RawMessage `json:"resources"`
			AllocatedResources *json.RawMessage `json:"allocatedResources"`
		} `json:"containerStatuses"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	raw := func(m *json.RawMessage) string {
		if m == nil {
			return "absent"
		}
		return string(*m)
	}
	if raw(got.Resources) != "{}" || raw(got.AllocatedResources) != "absent" {
		t.Errorf("pod resources %s, allocatedResources %s; want {} and absent", raw(got.Resources), raw(got.AllocatedResources))
	}
	want := map[string]string{"app": "{} absent", "later": "absent absent"}
	for _, cs := range got.ContainerStatuses {
		if g := raw(cs.Resources) + " " + raw(cs.AllocatedResources); g != want[cs.Name] {
			t.Errorf("%s: resources and allocatedResources %s, want %s", cs.Name, g, want[cs.Name])
		}
	}
}

// The pod's status.resources carry spec.resources' claims, and Generate
// shares none of the spec's resources with the status it returns.
func TestStatusResourcesAreCopies(t *testing.T) {
	p := resourced()
	p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "500m"), Limits: rl("cpu", "1"), Claims: []v1.ResourceClaim{{Name: "gpu"}}}
	s := status.Generate(status.Input{Pod: p, Runtime: observed(c("app", exited, 0, 0)), Now: now})
	if s.Resources == nil || s.ContainerStatuses[0].Resources == nil || s.ContainerStatuses[0].AllocatedResources == nil {
		t.Fatalf("resources %s, container's %s, allocated %s: want all set", reqs(s.Resources), reqs(s.ContainerStatuses[0].Resources), list(s.ContainerStatuses[0].AllocatedResources))
	}
	if diff := cmp.Diff(p.Spec.Resources.Claims, s.Resources.Claims); diff != "" {
		t.Errorf("status.resources claims (-spec +status):\n%s", diff)
	}
	s.Resources.Claims[0].Name = "changed"
	s.ContainerStatuses[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("9")
	s.ContainerStatuses[0].AllocatedResources[v1.ResourceMemory] = resource.MustParse("9Gi")
	s.Resources.Limits[v1.ResourceCPU] = resource.MustParse("9")
	if got := reqs(&p.Spec.Containers[0].Resources); got != specResources {
		t.Errorf("the spec changed with the status: %s", got)
	}
	if got := reqs(p.Spec.Resources); got != "requests cpu=500m; limits cpu=1" || p.Spec.Resources.Claims[0].Name != "gpu" {
		t.Errorf("the pod-level spec changed with the status: %s", got)
	}
}

// A pod the API shows Running reports in status.resources what its
// cgroup has (Input.PodCgroup), as the kubelet reads its pod cgroup: so
// a resize that is allocated but not carried out (its memory limit
// refused below the usage) shows the old limit beside the new
// allocatedResources. A figure the cgroup does not have is kept from the
// previous Running status; one at or below the CPU floor on both sides
// keeps the allocated value.
func TestRunningPodResourcesFromItsCgroup(t *testing.T) {
	p := resourced()
	p.Status.Phase = v1.PodRunning
	p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "10Ki"), Limits: rl("cpu", "1", "memory", "10Ki")}
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	cg := &runtime.ContainerResources{CPURequest: q("500m"), CPULimit: q("1"), MemoryLimit: q("30Mi")}
	s := status.Generate(status.Input{Pod: p, Runtime: observed(c("app", running, 0, 0)), Now: now, PodCgroup: cg})
	if got, want := reqs(s.Resources), "requests cpu=500m memory=10Ki; limits cpu=1 memory=30Mi"; got != want {
		t.Errorf("resources %s\nwant      %s", got, want)
	}
	if got, want := list(s.AllocatedResources), "cpu=500m memory=10Ki"; got != want {
		t.Errorf("allocatedResources %s, want %s", got, want)
	}

	// No memory limit in the cgroup: the previous one stays.
	prev := s
	s = status.Generate(status.Input{Pod: p, Runtime: observed(c("app", running, 0, 0)), Now: now, Previous: &prev,
		PodCgroup: &runtime.ContainerResources{CPURequest: q("1m"), CPULimit: q("1")}})
	if got, want := reqs(s.Resources), "requests cpu=1m memory=10Ki; limits cpu=1 memory=30Mi"; got != want {
		t.Errorf("without a memory limit in the cgroup: resources %s\nwant      %s", got, want)
	}

	// Not Running in the API: the allocated values.
	p.Status.Phase = v1.PodPending
	s = status.Generate(status.Input{Pod: p, Runtime: observed(c("app", running, 0, 0)), Now: now, PodCgroup: cg})
	if got, want := reqs(s.Resources), "requests cpu=500m memory=10Ki; limits cpu=1 memory=10Ki"; got != want {
		t.Errorf("a pending pod: resources %s\nwant      %s", got, want)
	}
}

// The resize conditions: True with the reason and message given; the
// transition time kept while the reason stays, the probe time while the
// message does too; none once the pod has ended.
func TestResizeConditions(t *testing.T) {
	p := resourced()
	t1 := now.Add(time.Minute)
	cond := func(s v1.PodStatus, typ v1.PodConditionType) *v1.PodCondition {
		for i := range s.Conditions {
			if s.Conditions[i].Type == typ {
				return &s.Conditions[i]
			}
		}
		return nil
	}
	s := status.Generate(status.Input{Pod: p, Runtime: observed(c("app", running, 0, 0)), Now: now,
		ResizePending: &status.Reason{Reason: v1.PodReasonDeferred, Message: "no room"}})
	if c := cond(s, v1.PodResizePending); c == nil || c.Status != v1.ConditionTrue || c.Reason != v1.PodReasonDeferred || c.Message != "no room" || !c.LastProbeTime.Time.Equal(now) {
		t.Fatalf("PodResizePending %+v", c)
	}
	if c := cond(s, v1.PodResizeInProgress); c != nil {
		t.Errorf("PodResizeInProgress %+v without one given", c)
	}
	prev := s
	s = status.Generate(status.Input{Pod: p, Runtime: observed(c("app", running, 0, 0)), Now: t1, Previous: &prev,
		ResizePending: &status.Reason{Reason: v1.PodReasonDeferred, Message: "no room"}})
	if c := cond(s, v1.PodResizePending); !c.LastTransitionTime.Time.Equal(now) || !c.LastProbeTime.Time.Equal(now) {
		t.Errorf("unchanged: transition %v probe %v, want both kept at %v", c.LastTransitionTime, c.LastProbeTime, now)
	}
	prev = s
	s = status.Generate(status.Input{Pod: p, Runtime: observed(c("app", running, 0, 0)), Now: t1, Previous: &prev,
		ResizePending: &status.Reason{Reason: v1.PodReasonDeferred, Message: "less room"}})
	if c := cond(s, v1.PodResizePending); !c.LastTransitionTime.Time.Equal(now) || !c.LastProbeTime.Time.Equal(t1) {
		t.Errorf("new message: transition %v probe %v, want %v and %v", c.LastTransitionTime, c.LastProbeTime, now, t1)
	}
	prev = s
	s = status.Generate(status.Input{Pod: p, Runtime: observed(c("app", running, 0, 0)), Now: t1, Previous: &prev,
		ResizePending: &status.Reason{Reason: v1.PodReasonInfeasible, Message: "never"}, ResizeInProgress: &status.Reason{Reason: v1.PodReasonError, Message: "failed"}})
	if c := cond(s, v1.PodResizePending); !c.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("new reason: transition %v, want %v", c.LastTransitionTime, t1)
	}
	if c := cond(s, v1.PodResizeInProgress); c == nil || c.Reason != v1.PodReasonError || c.Message != "failed" {
		t.Errorf("PodResizeInProgress %+v", c)
	}
	p.Status.Phase = v1.PodSucceeded
	s = status.Generate(status.Input{Pod: p, Runtime: observed(), Now: t1, ResizeInProgress: &status.Reason{}})
	if c := cond(s, v1.PodResizeInProgress); c != nil {
		t.Errorf("an ended pod has %+v", c)
	}
}
