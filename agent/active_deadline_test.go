package agent_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// deadlineAgent runs an agent on fakecri and the fake clock, with a
// channel source "api"; step waits for cond while moving the clock on by
// a second per poll, so relists, resyncs and the sync loop's ticks run.
func deadlineAgent(t *testing.T) (f *fidelity, clk *clocktesting.FakeClock, events *eventLog, step func(name, what string, cond func(v1.PodStatus) bool) v1.PodStatus) {
	return apiAgent(t, nil)
}

// apiAgent is deadlineAgent with the agent's Config changed by edit,
// when not nil.
func apiAgent(t *testing.T, edit func(*agent.Config)) (f *fidelity, clk *clocktesting.FakeClock, events *eventLog, step func(name, what string, cond func(v1.PodStatus) bool) v1.PodStatus) {
	t.Helper()
	f, clk, events, step, _ = apiAgentOn(t, newFake(t), t.TempDir(), edit)
	return f, clk, events, step
}

// apiAgentOn is apiAgent on the given runtime and directory (logs and pod
// directories), with a stop function that ends the agent and waits for
// it (also called at the test's end), so that a test can run a second
// agent where the first ran.
func apiAgentOn(t *testing.T, fake *fakecri.Runtime, dir string, edit func(*agent.Config)) (f *fidelity, clk *clocktesting.FakeClock, events *eventLog, step func(name, what string, cond func(v1.PodStatus) bool) v1.PodStatus, stop func()) {
	t.Helper()
	clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second)) // whole seconds, as statuses keep times
	events = &eventLog{}
	f = &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	cfg := agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		CRI:    cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Clock:  clk,
		Events: events.add,
	}
	if edit != nil {
		edit(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.agent = a
	stop = runUntilCleanup(t, a)
	f.send(podsource.SET)
	step = func(name, what string, cond func(v1.PodStatus) bool) v1.PodStatus {
		t.Helper()
		var got v1.PodStatus
		eventuallyShowing(t, name+" "+what, func() bool {
			clk.Step(time.Second)
			s, ok := f.history.last(name)
			got = s
			return ok && cond(s)
		}, func() string { return f.history.describe(name) })
		return got
	}
	return f, clk, events, step, stop
}

func phaseRunning(s v1.PodStatus) bool { return s.Phase == v1.PodRunning }

// deadlineExceeded: Failed with the kubelet's reason and message, every
// container stopped.
func deadlineExceeded(s v1.PodStatus) bool {
	if s.Phase != v1.PodFailed || len(s.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range s.ContainerStatuses {
		if c.State.Terminated == nil {
			return false
		}
	}
	return true
}

func checkDeadlineExceeded(t *testing.T, s v1.PodStatus, events *eventLog) {
	t.Helper()
	if s.Reason != "DeadlineExceeded" || s.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason %q message %q, want the kubelet's DeadlineExceeded", s.Reason, s.Message)
	}
	if !events.has("DeadlineExceeded: Pod was active on the node longer than the specified deadline") {
		t.Errorf("no DeadlineExceeded event in %v", events.list)
	}
}

// As the upstream spec "Pods should allow activeDeadlineSeconds to be
// updated": a running pod whose update lowers activeDeadlineSeconds below
// the time it has already run is failed with DeadlineExceeded and its
// containers are stopped.
func TestActiveDeadlineLoweredByAnUpdateFailsThePod(t *testing.T) {
	f, _, events, step := deadlineAgent(t)
	pod := apiPod("deadline", v1.RestartPolicyAlways, []string{"main"})
	f.send(podsource.ADD, pod)
	st := step("deadline", "running", phaseRunning)
	// Ten seconds of running, then the update.
	for range 10 {
		step("deadline", "still running", phaseRunning)
	}
	updated := pod.DeepCopy()
	updated.Status = st
	d := int64(5)
	updated.Spec.ActiveDeadlineSeconds = &d
	f.send(podsource.UPDATE, updated)
	got := step("deadline", "failed with DeadlineExceeded", deadlineExceeded)
	checkDeadlineExceeded(t, got, events)
}

// A pod whose deadline lies ahead fails once the clock passes it, with no
// update to set it off: its worker is due at the deadline's end, and the
// sync loop syncs it at its next tick, long before the pod's next
// periodic resync (a minute after its last sync).
func TestActiveDeadlinePassingFailsThePod(t *testing.T) {
	f, clk, events, step := deadlineAgent(t)
	pod := apiPod("deadline", v1.RestartPolicyAlways, []string{"main"})
	d := int64(30)
	pod.Spec.ActiveDeadlineSeconds = &d
	f.send(podsource.ADD, pod)
	st := step("deadline", "running", phaseRunning)
	start := st.StartTime.Time
	// The clock only moves between polls, so the time a poll first sees
	// the pod Failed is no earlier than the time it failed.
	var ran time.Duration
	step("deadline", "failed", func(s v1.PodStatus) bool {
		ran = clk.Now().Sub(start)
		return s.Phase == v1.PodFailed
	})
	if ran < 30*time.Second || ran > 45*time.Second {
		t.Errorf("seen failed %s after its start, want between the 30s deadline and 45s", ran)
	}
	got := step("deadline", "failed with DeadlineExceeded and stopped", deadlineExceeded)
	checkDeadlineExceeded(t, got, events)
}

// The pod fails at the sync loop's first tick at or after its deadline's
// end, with the clock held there: the loop sleeps until then, is woken
// at that tick for this pod, and needs no poll or resync after it.
func TestActiveDeadlineFailsThePodAtItsEnd(t *testing.T) {
	f, clk, events, step := deadlineAgent(t)
	pod := apiPod("deadline", v1.RestartPolicyAlways, []string{"main"})
	d := int64(30)
	pod.Spec.ActiveDeadlineSeconds = &d
	f.send(podsource.ADD, pod)
	st := step("deadline", "running", phaseRunning)
	// The clock moves by whole seconds from its start, and so do the
	// start time and the loop's ticks: the end is a tick.
	end := st.StartTime.Add(30 * time.Second)
	step("deadline", "running a second before the end", func(s v1.PodStatus) bool {
		return !clk.Now().Before(end.Add(-time.Second)) && phaseRunning(s)
	})
	if !clk.Now().Equal(end.Add(-time.Second)) {
		t.Fatalf("the clock is %v past the start, want 29s", clk.Now().Sub(st.StartTime.Time))
	}
	clk.Step(time.Second)
	// The failure shows in the agent's own status and the event at once;
	// the sink gets the Failed phase only once the pod's containers have
	// stopped.
	eventuallyShowing(t, "deadline failed with the clock at its end", func() bool {
		s, ok := f.agent.PodStatus(pod.UID)
		return ok && s.Phase == v1.PodFailed && s.Reason == "DeadlineExceeded" &&
			events.has("DeadlineExceeded: Pod was active on the node longer than the specified deadline")
	}, func() string {
		s, _ := f.agent.PodStatus(pod.UID)
		events.mu.Lock()
		defer events.mu.Unlock()
		return fmt.Sprintf("own status %s %q, events %v", s.Phase, s.Reason, events.list)
	})
	if !clk.Now().Equal(end) {
		t.Errorf("the clock moved to %v past the end", clk.Now().Sub(end))
	}
	got := step("deadline", "failed with DeadlineExceeded and stopped", deadlineExceeded)
	checkDeadlineExceeded(t, got, events)
}
