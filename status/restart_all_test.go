package status_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

func restartAllOn(codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}
}

// summary is each container's state, restart count and last state, and
// the AllContainersRestarting condition, in one comparable map.
func summary(s v1.PodStatus) map[string]string {
	state := func(cs v1.ContainerState) string {
		switch {
		case cs.Running != nil:
			return "running"
		case cs.Terminated != nil:
			return fmt.Sprintf("terminated(%d %s)", cs.Terminated.ExitCode, cs.Terminated.Reason)
		case cs.Waiting != nil:
			return "waiting(" + cs.Waiting.Reason + ")"
		}
		return "-"
	}
	out := map[string]string{"phase": string(s.Phase)}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for _, cs := range list {
			out[cs.Name] = fmt.Sprintf("%s restarts=%d last=%s", state(cs.State), cs.RestartCount, state(cs.LastTerminationState))
		}
	}
	for _, c := range s.Conditions {
		if c.Type == v1.AllContainersRestarting {
			out["AllContainersRestarting"] = strings.TrimSpace(fmt.Sprintf("%s %s", c.Status, c.Reason))
		}
	}
	return out
}

// The statuses of the pod of the upstream spec "should restart all
// containers on regular container exit", as the kubelet reports them
// through a restart of all containers: the exit that starts it sets
// AllContainersRestarting; once the sync removed every container, each
// waits with RestartingAllContainers and one more restart (what the
// spec's validateAllContainersRestarted waits for), the condition is
// False again, and the phase stays Running although the pod and its
// containers have restartPolicy Never; the counts and last states hold
// while the containers start again, even when the runtime counts from 0.
func TestGenerateThroughARestartOfAllContainers(t *testing.T) {
	p := withPolicy(withPolicy(pod(v1.RestartPolicyNever, []string{"init", "sidecar"}, "source", "regular"),
		"sidecar", v1.ContainerRestartPolicyAlways),
		"source", v1.ContainerRestartPolicyNever, restartAllOn(42))
	var prev *v1.PodStatus
	step := func(what string, obs *runtime.PodStatus, want map[string]string) v1.PodStatus {
		t.Helper()
		s := status.Generate(status.Input{Pod: p, Runtime: obs, Previous: prev, Now: now})
		if diff := cmp.Diff(want, summary(s)); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", what, diff)
		}
		prev = &s
		return s
	}
	step("all running", observed(c("source", running, 0, 0), c("regular", running, 0, 0), c("sidecar", running, 0, 0), c("init", exited, 0, 0)), map[string]string{
		"phase": "Running", "AllContainersRestarting": "False",
		"init": "terminated(0 ) restarts=0 last=-", "sidecar": "running restarts=0 last=-",
		"source": "running restarts=0 last=-", "regular": "running restarts=0 last=-",
	})
	step("the source exited 42", observed(c("source", exited, 42, 0), c("regular", running, 0, 0), c("sidecar", running, 0, 0), c("init", exited, 0, 0)), map[string]string{
		"phase": "Running", "AllContainersRestarting": "True RestartAllContainersStarted",
		"init": "terminated(0 ) restarts=0 last=-", "sidecar": "running restarts=0 last=-",
		"source": "terminated(42 ) restarts=0 last=-", "regular": "running restarts=0 last=-",
	})
	removed := "waiting(RestartingAllContainers) restarts=1 last=terminated(137 RestartingAllContainers)"
	s := step("every container removed", observed(), map[string]string{
		"phase": "Running", "AllContainersRestarting": "False",
		"init": removed, "sidecar": removed, "source": removed, "regular": removed,
	})
	if got := condition(s, v1.PodInitialized); got.Status != v1.ConditionTrue {
		t.Errorf("Initialized %s %s while the init containers run again, want it kept True", got.Status, got.Reason)
	}
	again := "waiting(PodInitializing) restarts=1 last=terminated(137 RestartingAllContainers)"
	step("the init container runs again", observed(c("init", running, 0, 1)), map[string]string{
		"phase": "Pending", "AllContainersRestarting": "False",
		"init": "running restarts=1 last=terminated(137 RestartingAllContainers)", "sidecar": again, "source": again, "regular": again,
	})
	step("all running again, counted from 0 by the runtime", observed(c("source", running, 0, 0), c("regular", running, 0, 0), c("sidecar", running, 0, 0), c("init", exited, 0, 0)), map[string]string{
		"phase": "Running", "AllContainersRestarting": "False",
		"init": "terminated(0 ) restarts=1 last=terminated(137 RestartingAllContainers)", "sidecar": "running restarts=1 last=terminated(137 RestartingAllContainers)",
		"source": "running restarts=1 last=terminated(137 RestartingAllContainers)", "regular": "running restarts=1 last=terminated(137 RestartingAllContainers)",
	})
}

// The pod of "should restart init and sidecar containers on init
// container exit", under restartPolicy Never: the init container that
// exited 42 does not fail the pod, and the regular container, which never
// ran, keeps waiting without a restart.
func TestGenerateRestartAllFromAnInitContainer(t *testing.T) {
	p := withPolicy(withPolicy(pod(v1.RestartPolicyNever, []string{"sidecar", "init", "source-init"}, "regular"),
		"sidecar", v1.ContainerRestartPolicyAlways),
		"source-init", v1.ContainerRestartPolicyNever, restartAllOn(42))
	first := status.Generate(status.Input{Pod: p, Runtime: observed(c("source-init", exited, 42, 0), c("init", exited, 0, 0), c("sidecar", running, 0, 0)), Now: now})
	if got := summary(first); got["phase"] != "Pending" || got["AllContainersRestarting"] != "True RestartAllContainersStarted" {
		t.Fatalf("after the exit: %v, want Pending and the condition True", got)
	}
	got := summary(status.Generate(status.Input{Pod: p, Runtime: observed(), Previous: &first, Now: now}))
	removed := "waiting(RestartingAllContainers) restarts=1 last=terminated(137 RestartingAllContainers)"
	want := map[string]string{
		"phase": "Pending", "AllContainersRestarting": "False",
		"sidecar": removed, "init": removed, "source-init": removed,
		"regular": "waiting(PodInitializing) restarts=0 last=-",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("once removed (-want +got):\n%s", diff)
	}
}

// The condition only appears on pods with a RestartAllContainers rule; an
// exit code the rule does not match neither sets it nor restarts
// anything, so a Never pod whose containers all failed ends, with the
// condition False and reason PodFailed.
func TestAllContainersRestartingCondition(t *testing.T) {
	withRule := func() *v1.Pod {
		return withPolicy(pod(v1.RestartPolicyNever, nil, "source", "regular"), "source", v1.ContainerRestartPolicyNever, restartAllOn(42))
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		obs  *runtime.PodStatus
		want map[string]string
	}{
		{"no such rule: no condition", withPolicy(pod(v1.RestartPolicyNever, nil, "source", "regular"), "source", v1.ContainerRestartPolicyNever, restartOn(42)),
			observed(c("source", exited, 42, 0), c("regular", running, 0, 0)),
			map[string]string{"phase": "Running", "source": "terminated(42 ) restarts=0 last=-", "regular": "running restarts=0 last=-"}},
		{"exit code not matched", withRule(), observed(c("source", exited, 1, 0), c("regular", running, 0, 0)),
			map[string]string{"phase": "Running", "AllContainersRestarting": "False", "source": "terminated(1 ) restarts=0 last=-", "regular": "running restarts=0 last=-"}},
		{"exit code not matched, all ended", withRule(), observed(c("source", exited, 1, 0), c("regular", exited, 0, 0)),
			map[string]string{"phase": "Failed", "AllContainersRestarting": "False PodFailed", "source": "terminated(1 ) restarts=0 last=-", "regular": "terminated(0 ) restarts=0 last=-"}},
		{"matched while all others ended: not done", withRule(), observed(c("source", exited, 42, 0), c("regular", exited, 0, 0)),
			map[string]string{"phase": "Running", "AllContainersRestarting": "True RestartAllContainersStarted", "source": "terminated(42 ) restarts=0 last=-", "regular": "terminated(0 ) restarts=0 last=-"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summary(status.Generate(status.Input{Pod: tc.pod, Runtime: tc.obs, Now: now}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
