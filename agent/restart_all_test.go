package agent_test

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// exitContainer makes the running container of the pod's status named
// name exit with code, as if its process ended.
func (f *fidelity) exitContainer(s v1.PodStatus, name string, code int32) string {
	f.t.Helper()
	c, ok := statusOf(s, name)
	if !ok || c.State.Running == nil {
		f.t.Fatalf("%s is %s, want it running", name, describeState(c))
	}
	_, id, _ := strings.Cut(c.ContainerID, "://")
	if err := f.fake.Exit(id, code, ""); err != nil {
		f.t.Fatal(err)
	}
	return c.ContainerID
}

// instances counts the pod's containers in the runtime, by name.
func (f *fidelity) instances(uid string) map[string]int {
	f.t.Helper()
	list, err := f.fake.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: uid}})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range list {
		out[c.GetMetadata().GetName()]++
	}
	return out
}

// One restart of all containers through the whole agent, with the pod of
// the upstream spec "should restart all containers on regular container
// exit" (test/e2e/common/node/container_restart_policy.go, "Pod Extended
// (RestartAllContainers)"): when source-container exits with the code of
// its RestartAllContainers rule, the pod reports AllContainersRestarting,
// then every container (init, sidecar, regular) with one more restart
// and a last state, what the spec's validateAllContainersRestarted waits
// for; the init container runs again and every container runs again as a
// new instance, the old ones gone; the pod, restartPolicy Never, never
// ends. A pod whose only container triggers it (so no container is
// killed, and no event follows the removal) starts again at once too.
func TestRestartAllContainers(t *testing.T) {
	f := startFidelity(t, false)
	cAlways, cNever := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever
	rule42 := []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}

	p := apiPod("restart-all", v1.RestartPolicyNever, []string{"source-container", "regular"})
	p.Spec.Containers[0].RestartPolicy, p.Spec.Containers[0].RestartPolicyRules = &cNever, rule42
	p.Spec.InitContainers = []v1.Container{container("init", fakecri.EnvExitCode, "0"), container("sidecar")}
	p.Spec.InitContainers[1].RestartPolicy = &cAlways
	solo := apiPod("solo", v1.RestartPolicyNever, []string{"only"})
	solo.Spec.Containers[0].RestartPolicy, solo.Spec.Containers[0].RestartPolicyRules = &cNever, rule42
	f.send(podsource.SET, p, solo)

	names := []string{"init", "sidecar", "source-container", "regular"}
	allRunning := func(s v1.PodStatus) bool {
		for _, n := range names[1:] {
			if c, ok := statusOf(s, n); !ok || c.State.Running == nil || !c.Ready {
				return false
			}
		}
		return s.Phase == v1.PodRunning
	}
	s := f.waitFor("restart-all", "runs", allRunning)
	firstIDs := map[string]string{}
	for _, n := range names {
		c, _ := statusOf(s, n)
		firstIDs[n] = c.ContainerID
	}
	if c := condOf(s, v1.AllContainersRestarting); c.Status != v1.ConditionFalse {
		t.Errorf("AllContainersRestarting %q before any exit, want False", c.Status)
	}
	f.exitContainer(s, "source-container", 42)
	soloFirst := f.exitContainer(f.waitFor("solo", "runs", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning }), "only", 42)

	f.waitFor("restart-all", "shows every container restarted", func(s v1.PodStatus) bool {
		for _, n := range names {
			c, ok := statusOf(s, n)
			if !ok || c.RestartCount == 0 || c.LastTerminationState.Terminated == nil {
				return false
			}
		}
		return true
	})
	s = f.waitFor("restart-all", "runs again", func(s v1.PodStatus) bool {
		c, _ := statusOf(s, "init")
		return allRunning(s) && c.State.Terminated != nil && c.State.Terminated.ExitCode == 0 && c.ContainerID != firstIDs["init"]
	})
	for _, n := range names {
		c, _ := statusOf(s, n)
		if c.ContainerID == firstIDs[n] || c.RestartCount != 1 || c.LastTerminationState.Terminated == nil || c.LastTerminationState.Terminated.Reason != "RestartingAllContainers" {
			t.Errorf("%s: %s %s, %d restarts, last state %+v; want a new instance with 1 restart, last terminated by RestartingAllContainers",
				n, c.ContainerID, describeState(c), c.RestartCount, c.LastTerminationState.Terminated)
		}
	}
	if got := f.instances(string(p.UID)); len(got) != 4 || got["init"]+got["sidecar"]+got["source-container"]+got["regular"] != 4 {
		t.Errorf("containers in the runtime %v, want one of each: the old instances removed", got)
	}
	sawTrue := false
	for _, st := range f.history.all("restart-all") {
		if terminalPhase(st) {
			t.Errorf("the pod went %s\n%s", st.Phase, f.history.describe("restart-all"))
			break
		}
		if c := condOf(st, v1.AllContainersRestarting); c.Status == v1.ConditionTrue && c.Reason == "RestartAllContainersStarted" {
			sawTrue = true
		}
	}
	if !sawTrue {
		t.Errorf("AllContainersRestarting was never True with RestartAllContainersStarted\n%s", f.history.describe("restart-all"))
	}
	if c := condOf(s, v1.AllContainersRestarting); c.Status != v1.ConditionFalse {
		t.Errorf("AllContainersRestarting %q once all run again, want False", c.Status)
	}

	f.waitFor("solo", "runs its container again", func(s v1.PodStatus) bool {
		c, ok := statusOf(s, "only")
		return ok && c.State.Running != nil && c.ContainerID != soloFirst && c.RestartCount == 1
	})
}
