package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func statusOf(s v1.PodStatus, name string) (v1.ContainerStatus, bool) {
	for _, list := range [][]v1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses, s.EphemeralContainerStatuses} {
		for _, c := range list {
			if c.Name == name {
				return c, true
			}
		}
	}
	return v1.ContainerStatus{}, false
}

// The pods of the upstream NodeConformance specs "Container Restart
// Rules" (test/e2e/common/node/container_restart_policy.go), on fakecri
// through the whole agent: a container restarts when its restart rules,
// its own restartPolicy or else the pod's say so, and a pod none of whose
// containers restarts ends.
func TestContainerRestartRules(t *testing.T) {
	f := startFidelity(t, false)
	cAlways, cNever := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever
	rule42 := []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	cases := []struct {
		name     string
		pod      v1.RestartPolicy
		policy   *v1.ContainerRestartPolicy
		rules    []v1.ContainerRestartRule
		exit     string
		restarts bool
	}{
		{"rule-match", v1.RestartPolicyNever, &cNever, rule42, "42", true},
		{"rule-mismatch", v1.RestartPolicyNever, &cNever, rule42, "1", false},
		{"container-never", v1.RestartPolicyAlways, &cNever, nil, "1", false},
		{"container-always", v1.RestartPolicyNever, &cAlways, nil, "1", true},
		{"pod-always", v1.RestartPolicyAlways, nil, nil, "1", true},
	}
	var pods []*v1.Pod
	for _, tc := range cases {
		p := apiPod(tc.name, tc.pod, []string{"main-container"}, fakecri.EnvExitCode, tc.exit)
		p.Spec.Containers[0].RestartPolicy = tc.policy
		p.Spec.Containers[0].RestartPolicyRules = tc.rules
		pods = append(pods, p)
	}
	f.send(podsource.SET, pods...)
	for _, tc := range cases {
		if tc.restarts {
			f.waitFor(tc.name, "restarts its container", func(s v1.PodStatus) bool {
				c, ok := statusOf(s, "main-container")
				return ok && c.RestartCount > 0
			})
			continue
		}
		s := f.waitFor(tc.name, "ends", terminalPhase)
		c, _ := statusOf(s, "main-container")
		if s.Phase != v1.PodFailed || c.RestartCount != 0 || c.State.Terminated == nil {
			t.Errorf("%s: phase %s, container %s with %d restarts; want Failed, terminated, never restarted\n%s",
				tc.name, s.Phase, describeState(c), c.RestartCount, f.history.describe(tc.name))
		}
	}
	for _, tc := range cases {
		if !tc.restarts {
			continue
		}
		for _, s := range f.history.all(tc.name) {
			if terminalPhase(s) {
				t.Errorf("%s went %s while its container restarts\n%s", tc.name, s.Phase, f.history.describe(tc.name))
				break
			}
		}
	}
}

// An ephemeral container added to a running pod, as the API server's
// ephemeralcontainers subresource adds it (the pod's next version in the
// source), runs in the pod beside its containers, which are left alone;
// its status is reported in ephemeralContainerStatuses and it can be
// exec'd into. A second one added later starts too.
func TestEphemeralContainersAddedToARunningPod(t *testing.T) {
	f := startFidelity(t, false)
	pod := apiPod("target", v1.RestartPolicyAlways, []string{"test-container-1"})
	f.send(podsource.SET, pod)
	s := f.waitFor("target", "runs", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	app := s.ContainerStatuses[0].ContainerID

	withDebugger := pod.DeepCopy()
	withDebugger.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: "debugger", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent, Stdin: true, TTY: true,
		Command:                  []string{"/bin/sh", "-c", "while true; do echo polo; sleep 2; done"},
		TerminationMessagePath:   v1.TerminationMessagePathDefault,
		TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError,
	}}}
	f.send(podsource.SET, withDebugger)
	s = f.waitFor("target", "runs its ephemeral container", func(s v1.PodStatus) bool {
		return len(s.EphemeralContainerStatuses) == 1 && s.EphemeralContainerStatuses[0].State.Running != nil
	})
	if c := s.ContainerStatuses[0]; c.ContainerID != app || c.RestartCount != 0 || c.State.Running == nil {
		t.Errorf("test-container-1 is %s %s with %d restarts, want %s still running", c.ContainerID, describeState(c), c.RestartCount, app)
	}
	if s.Phase != v1.PodRunning || condOf(s, v1.PodReady).Status != v1.ConditionTrue {
		t.Errorf("pod %s ready=%s, want Running and ready", s.Phase, condOf(s, v1.PodReady).Status)
	}
	ec := s.EphemeralContainerStatuses[0]
	if ec.Name != "debugger" || ec.Ready || ec.ContainerID == "" {
		t.Errorf("ephemeral status %+v, want debugger, not ready, with its container ID", ec)
	}
	_, id, _ := strings.Cut(ec.ContainerID, "://")
	ctx := context.Background()
	cs, err := f.fake.ContainerStatus(ctx, id, false)
	if err != nil || cs.GetStatus().GetLabels()[cri.LabelPodUID] != string(pod.UID) {
		t.Errorf("debugger in the runtime: %v %v, want a container of the pod", cs.GetStatus().GetLabels(), err)
	}
	if out, _, err := f.fake.ExecSync(ctx, id, []string{"echo", "marco"}, 0); err != nil || !strings.Contains(string(out), "marco") {
		t.Errorf("exec in the debugger: %q %v", out, err)
	}

	two := withDebugger.DeepCopy()
	two.Spec.EphemeralContainers = append(two.Spec.EphemeralContainers, v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: "debugger2", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent,
		TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile,
	}})
	f.send(podsource.SET, two)
	f.waitFor("target", "runs both ephemeral containers", func(s v1.PodStatus) bool {
		n := 0
		for _, c := range s.EphemeralContainerStatuses {
			if c.State.Running != nil {
				n++
			}
		}
		return n == 2
	})
	list, err := f.fake.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(pod.UID)}})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, c := range list {
		count[c.GetMetadata().GetName()]++
	}
	if want := map[string]int{"test-container-1": 1, "debugger": 1, "debugger2": 1}; fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("containers of the pod %v, want %v", count, want)
	}
}
