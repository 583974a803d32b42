package status_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/status"
)

// runningAs returns a status in which the pod's container "a" is the
// container id and runs.
func runningAs(id string) v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
		Name: "a", ContainerID: id, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
	}}}
}

// verdicts counts the readiness and startup verdicts m keeps for ids.
func verdicts(m *status.Manager, ids []string) int {
	ready, started := m.VerdictsFor(ids)
	return len(ready) + len(started)
}

func TestManagerPrunesVerdictsOfDeadContainers(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(now)})
	p := pod(v1.RestartPolicyAlways, nil, "a")
	var ids []string
	for i := range 200 {
		id := fmt.Sprintf("fake://a-%d", i)
		ids = append(ids, id)
		m.SetPodStatus(p, runningAs(id)) // the container restarted
		m.SetContainerStartup(p.UID, id, true)
		m.SetContainerReadiness(p.UID, id, true)
	}
	if n := verdicts(m, ids); n != 2 {
		t.Errorf("after 200 restarts %d verdicts are kept, want 2 (those of the running container)", n)
	}
	last := ids[len(ids)-1]
	if ready, started := m.VerdictsFor([]string{last}); !ready[last] || !started[last] {
		t.Errorf("the running container lost its verdicts: ready %v started %v", ready, started)
	}

	// A terminated container's verdicts go with the status that shows it so.
	dead := runningAs(last)
	dead.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	m.SetPodStatus(p, dead)
	if n := verdicts(m, ids); n != 0 {
		t.Errorf("%d verdicts kept for a terminated container, want 0", n)
	}
	// A late verdict for it, or for a container never shown, is not kept.
	m.SetContainerReadiness(p.UID, last, false)
	m.SetContainerReadiness(p.UID, "fake://never-shown", true)
	if n := verdicts(m, append(ids, "fake://never-shown")); n != 0 {
		t.Errorf("%d verdicts kept for dead or unknown containers, want 0", n)
	}
}

func TestManagerKeepsVerdictsOfEveryLiveContainerKind(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(now)})
	p := pod(v1.RestartPolicyAlways, []string{"sidecar"}, "a")
	run := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	s := v1.PodStatus{
		InitContainerStatuses:      []v1.ContainerStatus{{Name: "sidecar", ContainerID: "fake://s", State: run}},
		ContainerStatuses:          []v1.ContainerStatus{{Name: "a", ContainerID: "fake://a", State: run}},
		EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "debug", ContainerID: "fake://d", State: run}},
	}
	m.SetPodStatus(p, s)
	ids := []string{"fake://s", "fake://a", "fake://d"}
	for _, id := range ids {
		m.SetContainerStartup(p.UID, id, true)
	}
	s.Phase = v1.PodRunning // a change: pruning runs
	m.SetPodStatus(p, s)
	if _, started := m.VerdictsFor(ids); len(started) != 3 {
		t.Errorf("verdicts of live init, regular and ephemeral containers: %v, want all 3", started)
	}
	m.RemovePod(p.UID)
	if n := verdicts(m, ids); n != 0 {
		t.Errorf("%d verdicts kept after RemovePod, want 0", n)
	}
	m.SetContainerReadiness(p.UID, "fake://a", true) // late, for a forgotten pod
	if n := verdicts(m, ids); n != 0 {
		t.Errorf("a verdict for a forgotten pod is kept")
	}
}

// pending reports whether a signal is waiting on ch.
func pending(ch <-chan struct{}) bool {
	select {
	case _, ok := <-ch:
		return ok
	default:
		return false
	}
}

func TestSubscribe(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(now)})
	changes, cancel := m.Subscribe()
	defer cancel()
	p := pod(v1.RestartPolicyAlways, nil, "a")

	m.SetPodStatus(p, runningAs("fake://a-0"))
	if !pending(changes) {
		t.Fatal("a pod's first status did not signal")
	}
	m.SetPodStatus(p, runningAs("fake://a-0"))
	if pending(changes) {
		t.Error("an unchanged status signalled")
	}
	for i := range 50 {
		m.SetPodStatus(p, runningAs(fmt.Sprint("fake://a-", i+1)))
	}
	if !pending(changes) {
		t.Error("50 changes did not signal")
	}
	if pending(changes) {
		t.Error("50 changes left more than one signal pending")
	}
	m.RemovePod(p.UID)
	if !pending(changes) {
		t.Error("removing a pod did not signal")
	}
	m.RemovePod(p.UID)
	if pending(changes) {
		t.Error("removing an unknown pod signalled")
	}

	other, cancelOther := m.Subscribe()
	m.SetPodStatus(p, runningAs("fake://a-0"))
	cancel()
	cancel() // twice is fine
	if !pending(other) {
		t.Error("a second subscriber was not signalled")
	}
	if _, ok := <-changes; !ok {
		t.Error("the signal pending at cancel was lost")
	}
	m.SetPodStatus(p, runningAs("fake://a-1"))
	if _, ok := <-changes; ok {
		t.Error("a cancelled subscription was signalled")
	}
	cancelOther()
}

func TestSubscribeConcurrently(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(now)})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(2)
		go func() { // a writer
			defer wg.Done()
			p := pod(v1.RestartPolicyAlways, nil, "a")
			p.UID = types.UID(fmt.Sprint("uid-", w))
			for i := range 100 {
				m.SetPodStatus(p, runningAs(fmt.Sprint("fake://a-", i)))
				m.SetContainerReadiness(p.UID, fmt.Sprint("fake://a-", i), true)
			}
			m.RemovePod(p.UID)
		}()
		go func() { // a subscriber that reads, then leaves
			defer wg.Done()
			changes, cancel := m.Subscribe()
			defer cancel()
			for range 20 {
				select {
				case <-changes:
				default:
					goruntime.Gosched()
				}
				_ = m.Pods()
			}
		}()
	}
	wg.Wait()
	changes, cancel := m.Subscribe()
	cancel()
	if _, ok := <-changes; ok {
		t.Error("a subscription cancelled before any change was signalled")
	}
}

func TestManagerArmsNoTimerWhenIdle(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	pushed := make(chan struct{}, 1)
	m := status.New(status.Config{Clock: clk, Sink: status.SinkFunc(func(context.Context, *v1.Pod, v1.PodStatus) error {
		pushed <- struct{}{}
		return nil
	})})
	runManager(t, m)
	p := pod(v1.RestartPolicyAlways, nil, "a")
	m.SetPodStatus(p, runningAs("fake://a-0"))
	<-pushed
	if clk.HasWaiters() {
		t.Error("a timer is armed with every status pushed")
	}
}

func TestManagerBacksOffRetries(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	calls := make(chan error, 8)
	failures := 3
	m := status.New(status.Config{Clock: clk, RetryPeriod: 5 * time.Second, MaxRetryPeriod: 12 * time.Second,
		Sink: status.SinkFunc(func(context.Context, *v1.Pod, v1.PodStatus) error {
			var err error
			if failures > 0 {
				failures--
				err = context.DeadlineExceeded
			}
			calls <- err
			return err
		})})
	runManager(t, m)
	p := pod(v1.RestartPolicyAlways, nil, "a")
	m.SetPodStatus(p, runningAs("fake://a-0"))
	if err := <-calls; err == nil {
		t.Fatal("first push succeeded")
	}
	// Retries after 5s, then 10s, then 12s (the cap).
	for i, wait := range []time.Duration{5 * time.Second, 10 * time.Second, 12 * time.Second} {
		waitForWaiter(t, clk)
		clk.Step(wait - time.Second)
		if !clk.HasWaiters() {
			t.Fatalf("retry %d came before %v", i+1, wait)
		}
		clk.Step(time.Second)
		err := <-calls
		if (err == nil) != (i == 2) {
			t.Fatalf("retry %d: %v", i+1, err)
		}
	}
	// All pushed: the last timer fired, and no other is armed.
	if clk.HasWaiters() {
		t.Error("a timer is armed after every status was pushed")
	}
}

// A readiness verdict recomputes the pod's Ready conditions by the same
// rules as Generate: a sidecar that is not ready keeps the pod unready.
func TestReadinessVerdictKeepsPodUnreadyWhileASidecarIs(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	m := status.New(status.Config{Clock: clk})
	p := sidecarPod(v1.RestartPolicyAlways, "app")
	p.Spec.InitContainers[0].StartupProbe = nil
	p.Spec.InitContainers[0].ReadinessProbe = &v1.Probe{InitialDelaySeconds: 15}
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
	proxy, app := c("proxy", running, 0, 0), c("app", running, 0, 0)
	m.SetPodStatus(p, status.Generate(status.Input{Pod: p, Runtime: observed(app, proxy), Now: now}))

	clk.Step(time.Second)
	m.SetContainerReadiness(p.UID, proxy.ID.String(), false) // the sidecar's initial verdict
	m.SetContainerReadiness(p.UID, app.ID.String(), true)
	s, _ := m.GetPodStatus(p.UID)
	for _, typ := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		if got := condition(s, typ); got.Status != v1.ConditionFalse || got.Message != "containers with unready status: [proxy]" {
			t.Errorf("%s with the sidecar unready: %s %q %q", typ, got.Status, got.Reason, got.Message)
		}
	}

	clk.Step(15 * time.Second)
	m.SetContainerReadiness(p.UID, proxy.ID.String(), true)
	s, _ = m.GetPodStatus(p.UID)
	if got := condition(s, v1.PodReady); got.Status != v1.ConditionTrue || !got.LastTransitionTime.Time.Equal(now.Add(16*time.Second)) {
		t.Errorf("Ready once the sidecar is ready: %s since %v, want True since %v", got.Status, got.LastTransitionTime, now.Add(16*time.Second))
	}
}
