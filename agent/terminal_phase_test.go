package agent_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
	"github.com/nodekit/nodekit/status"
)

// As the kubelet's status manager: the sink never gets a terminal phase
// while the pod's containers or sandbox may still run, so that nothing
// outside the node takes the pod for finished (and starts its
// replacement) while it still holds what it ran with. A Never pod whose
// container exited keeps its sandbox until its worker stops it; a pod
// failed at its active deadline is Failed before its containers are
// killed. Each gets its terminal phase once the runtime runs nothing of
// it.
func TestSinkGetsNoTerminalPhaseWhileThePodRuns(t *testing.T) {
	fake := newFake(t)
	var (
		mu    sync.Mutex
		early []string
	)
	f, _, _, step, _ := apiAgentOn(t, fake, t.TempDir(), func(c *agent.Config) {
		next := c.StatusSink
		c.StatusSink = status.SinkFunc(func(ctx context.Context, pod *v1.Pod, s v1.PodStatus) error {
			if s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed {
				if left := runningOf(ctx, t, fake, pod); left != "" {
					mu.Lock()
					early = append(early, fmt.Sprintf("%s %s while %s", pod.Name, s.Phase, left))
					mu.Unlock()
				}
			}
			return next.UpdatePodStatus(ctx, pod, s)
		})
	})
	job := apiPod("job", v1.RestartPolicyNever, []string{"main"}, fakecri.EnvExitAfter, "300ms")
	deadline := apiPod("deadline", v1.RestartPolicyAlways, []string{"main"})
	d := int64(5)
	deadline.Spec.ActiveDeadlineSeconds = &d
	f.send(podsource.ADD, job, deadline)
	step("job", "succeeded", func(s v1.PodStatus) bool { return s.Phase == v1.PodSucceeded })
	step("deadline", "failed", func(s v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	mu.Lock()
	defer mu.Unlock()
	for _, e := range early {
		t.Errorf("the sink got %s", e)
	}
}

// runningOf names what the runtime still runs of the pod: running
// containers and ready sandboxes; "" when nothing.
func runningOf(ctx context.Context, t *testing.T, fake *fakecri.Runtime, pod *v1.Pod) string {
	sel := map[string]string{cri.LabelPodUID: string(pod.UID)}
	cs, err := fake.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}, LabelSelector: sel})
	if err != nil {
		t.Error(err)
	}
	sbs, err := fake.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}, LabelSelector: sel})
	if err != nil {
		t.Error(err)
	}
	if len(cs) == 0 && len(sbs) == 0 {
		return ""
	}
	return fmt.Sprintf("%d containers and %d sandboxes run", len(cs), len(sbs))
}
