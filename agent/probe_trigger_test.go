package agent_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// As the upstream spec "Probing container should be ready immediately
// after startupProbe succeeds": once a container's startup probe
// succeeds, the pod syncs and its readiness probe runs at once, as the
// kubelet triggers it, rather than at the next tick of its period (here
// 300s). The fake clock moves in small steps once the container has
// started, so only a probe run at once makes the pod Ready in time.
func TestReadinessProbedAsSoonAsTheStartupProbeSucceeds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	fake := newFake(t)
	dir := t.TempDir()
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		RelistPeriod: 100 * time.Millisecond,
		CRI:          cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Clock:        clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	f.send(podsource.SET)
	pod := apiPod("slow", v1.RestartPolicyAlways, []string{"main"}, fakecri.EnvExec, `{"check-ready": {"exitCode": 0}, "check-started": {"exitCode": 1}}`)
	c := &pod.Spec.Containers[0]
	c.StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check-started"}}}, PeriodSeconds: 1, FailureThreshold: 1000}
	c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check-ready"}}}, PeriodSeconds: 300}
	f.send(podsource.ADD, pod)
	stepping := func(step time.Duration, what string, cond func(v1.PodStatus) bool) v1.PodStatus {
		t.Helper()
		var got v1.PodStatus
		eventuallyShowing(t, what, func() bool {
			clk.Step(step)
			s, ok := f.history.last("slow")
			got = s
			return ok && cond(s)
		}, func() string { return f.history.describe("slow") })
		return got
	}
	st := stepping(time.Second, "the container runs, not started", func(s v1.PodStatus) bool {
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Running != nil
	})
	if cs := st.ContainerStatuses[0]; (cs.Started != nil && *cs.Started) || cs.Ready {
		t.Fatalf("container %+v, want neither started nor ready before its startup probe succeeds", cs)
	}
	// A period on, the readiness worker's first tick, after its random
	// jitter, has passed: its next one is due at a random time within the
	// next 300s.
	for range 300 {
		clk.Step(time.Second)
		time.Sleep(time.Millisecond)
	}
	if err := fake.SetExecResult(strings.TrimPrefix(st.ContainerStatuses[0].ContainerID, "fakecri://"), "check-started", fakecri.ExecResult{}); err != nil {
		t.Fatal(err)
	}
	stepping(time.Second, "the container started", func(s v1.PodStatus) bool {
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].Started != nil && *s.ContainerStatuses[0].Started
	})
	from := clk.Now()
	stepping(50*time.Millisecond, "the pod is Ready", func(s v1.PodStatus) bool {
		if after := clk.Since(from); after > 10*time.Second {
			t.Fatalf("not Ready %s after the startup probe succeeded, want at once (the readiness period is 300s)", after)
		}
		return condOf(s, v1.PodReady).Status == v1.ConditionTrue
	})
}
