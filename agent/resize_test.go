package agent_test

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
)

// resizeAgent is apiAgent with a node of 1 CPU and 1Gi.
func resizeAgent(t *testing.T) (f *fidelity, events *eventLog, step func(name, what string, cond func(v1.PodStatus) bool) v1.PodStatus) {
	t.Helper()
	f, _, events, step = apiAgent(t, func(c *agent.Config) {
		c.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourcePods: resource.MustParse("10")}
	})
	return f, events, step
}

// runningSized starts pod "web" at generation 1 with 200m and 128Mi, and
// returns it with its status once it runs so.
func runningSized(f *fidelity, step func(name, what string, cond func(v1.PodStatus) bool) v1.PodStatus) (*v1.Pod, v1.PodStatus) {
	pod := apiPod("web", v1.RestartPolicyAlways, []string{"main"})
	pod.Generation = 1
	pod.Spec.Containers[0].Resources = sized("200m", "128Mi")
	f.send(podsource.ADD, pod)
	return pod, step("web", "running", func(s v1.PodStatus) bool { return containerSized(s, "200m", "128Mi") })
}

func sized(cpu, mem string) v1.ResourceRequirements {
	l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	return v1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// containerSized reports whether the running container's status shows
// the resources, as allocated and as the runtime applied them.
func containerSized(s v1.PodStatus, cpu, mem string) bool {
	if len(s.ContainerStatuses) != 1 {
		return false
	}
	c := s.ContainerStatuses[0]
	if c.State.Running == nil || c.Resources == nil {
		return false
	}
	want := sized(cpu, mem)
	return c.AllocatedResources.Cpu().Cmp(*want.Requests.Cpu()) == 0 && c.AllocatedResources.Memory().Cmp(*want.Requests.Memory()) == 0 &&
		c.Resources.Limits.Cpu().Cmp(*want.Limits.Cpu()) == 0 && c.Resources.Limits.Memory().Cmp(*want.Limits.Memory()) == 0
}

// A resize that fits the node is carried out in place, as the kubelet
// does: the container keeps running (no restart), its status shows the
// new resources, the pod's generation is observed, no resize condition
// is left, and the events say it started and completed.
func TestResizeInPlaceThroughTheAgent(t *testing.T) {
	f, events, step := resizeAgent(t)
	pod, st := runningSized(f, step)
	id := st.ContainerStatuses[0].ContainerID
	if events.has("ResizeCompleted") {
		t.Errorf("a ResizeCompleted event at creation: %v", events.list)
	}

	resized := pod.DeepCopy()
	resized.Generation = 2
	resized.Status = st
	resized.Spec.Containers[0].Resources = sized("400m", "256Mi")
	f.send(podsource.UPDATE, resized)
	got := step("web", "resized", func(s v1.PodStatus) bool {
		return containerSized(s, "400m", "256Mi") && !resizing(s) && s.ObservedGeneration == 2
	})
	if c := got.ContainerStatuses[0]; c.ContainerID != id || c.RestartCount != 0 {
		t.Errorf("container %s restarts %d, want %s resized in place", c.ContainerID, c.RestartCount, id)
	}
	for _, want := range []string{"ResizeStarted: Pod resize started: ", "ResizeCompleted: Pod resize completed: "} {
		found := false
		for _, e := range events.snapshot() {
			if strings.HasPrefix(e, want) && strings.Contains(e, `"generation":2`) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %q event for generation 2 in %v", want, events.snapshot())
		}
	}
}

// A resize that does not fit beside the other pods waits, Deferred with
// the kubelet's message, and the pod keeps running with what it had; it
// goes ahead once the other pod is gone.
func TestResizeDeferredUntilItFits(t *testing.T) {
	f, _, step := resizeAgent(t)
	other := apiPod("other", v1.RestartPolicyAlways, []string{"main"})
	other.Spec.Containers[0].Resources = sized("600m", "128Mi")
	pod := apiPod("web", v1.RestartPolicyAlways, []string{"main"})
	pod.Spec.Containers[0].Resources = sized("200m", "128Mi")
	f.send(podsource.ADD, other, pod)
	st := step("web", "running", func(s v1.PodStatus) bool { return containerSized(s, "200m", "128Mi") })
	step("other", "running", func(s v1.PodStatus) bool { return containerSized(s, "600m", "128Mi") })

	resized := pod.DeepCopy()
	resized.Status = st
	resized.Spec.Containers[0].Resources = sized("500m", "128Mi")
	f.send(podsource.UPDATE, resized)
	got := step("web", "deferred", func(s v1.PodStatus) bool { return condOf(s, v1.PodResizePending).Reason == v1.PodReasonDeferred })
	c := condOf(got, v1.PodResizePending)
	if c.Status != v1.ConditionTrue || c.Message != "Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000" {
		t.Errorf("PodResizePending %+v, want True with the kubelet's message", c)
	}
	if !containerSized(got, "200m", "128Mi") {
		t.Errorf("a deferred pod's container status %+v, want its allocated 200m", got.ContainerStatuses)
	}

	f.send(podsource.REMOVE, other)
	step("web", "resized once the other pod is gone", func(s v1.PodStatus) bool {
		return containerSized(s, "500m", "128Mi") && !resizing(s)
	})
}

func (e *eventLog) snapshot() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

// A resize that would change the pod's QoS class is infeasible (the API
// refuses it; another source may send it); a spec back to what the pod
// was given ends the wait.
func TestResizeChangingQoSIsInfeasible(t *testing.T) {
	f, events, step := resizeAgent(t)
	pod := apiPod("web", v1.RestartPolicyAlways, []string{"main"})
	pod.Spec.Containers[0].Resources = sized("200m", "128Mi")
	f.send(podsource.ADD, pod)
	st := step("web", "running", func(s v1.PodStatus) bool { return containerSized(s, "200m", "128Mi") })

	burstable := pod.DeepCopy()
	burstable.Status = st
	burstable.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("100m")
	f.send(podsource.UPDATE, burstable)
	got := step("web", "infeasible", func(s v1.PodStatus) bool { return condOf(s, v1.PodResizePending).Reason == v1.PodReasonInfeasible })
	if c := condOf(got, v1.PodResizePending); c.Message != "Pod QOS Class may not change as a result of resizing" {
		t.Errorf("PodResizePending %+v", c)
	}
	if !events.has("ResizeInfeasible: Pod resize Infeasible: ") {
		t.Errorf("no ResizeInfeasible event in %v", events.snapshot())
	}
	back := pod.DeepCopy()
	back.Status = got
	f.send(podsource.UPDATE, back)
	step("web", "no longer pending", func(s v1.PodStatus) bool { return !resizing(s) && containerSized(s, "200m", "128Mi") })
}

// As the kubelet's status manager: PodResizeInProgress keeps the
// generation at which its resize was accepted while the resize lasts,
// here failing, though the pod's generation moves on.
func TestResizeInProgressKeepsTheGenerationItWasAcceptedAt(t *testing.T) {
	f, _, step := resizeAgent(t)
	pod, st := runningSized(f, step)

	f.fake.InjectError("UpdateContainerResources", errors.New("the runtime refused"))
	resized := pod.DeepCopy()
	resized.Generation = 2
	resized.Status = st
	resized.Spec.Containers[0].Resources = sized("400m", "256Mi")
	f.send(podsource.UPDATE, resized)
	got := step("web", "resize failing", func(s v1.PodStatus) bool {
		return condOf(s, v1.PodResizeInProgress).Reason == v1.PodReasonError && s.ObservedGeneration == 2
	})
	if g := condOf(got, v1.PodResizeInProgress).ObservedGeneration; g != 2 {
		t.Fatalf("PodResizeInProgress observedGeneration %d, want 2", g)
	}

	f.fake.InjectError("UpdateContainerResources", errors.New("the runtime refused again"))
	labelled := resized.DeepCopy()
	labelled.Generation = 3 // another change of the spec's generation, the resize still under way
	labelled.Status = got
	f.send(podsource.UPDATE, labelled)
	got = step("web", "generation 3 observed, the resize still failing", func(s v1.PodStatus) bool {
		return s.ObservedGeneration == 3 && condOf(s, v1.PodResizeInProgress).Reason == v1.PodReasonError
	})
	if g := condOf(got, v1.PodResizeInProgress).ObservedGeneration; g != 2 {
		t.Errorf("PodResizeInProgress observedGeneration %d at generation 3, want 2, the resize's", g)
	}
	if g := condOf(got, v1.PodReady).ObservedGeneration; g != 3 {
		t.Errorf("Ready observedGeneration %d, want 3", g)
	}
}
