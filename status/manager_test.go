package status_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func TestManagerRangeVisitsEachStatusUntilFalse(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(now)})
	want := map[types.UID]v1.PodPhase{}
	for i := range 3 {
		p := pod(v1.RestartPolicyAlways, nil, "a")
		p.UID = types.UID(fmt.Sprint("uid-", i))
		p.Name = fmt.Sprint("pod-", i)
		m.SetPodStatus(p, runningAs("fake://a"))
		want[p.UID] = v1.PodRunning
	}
	got := map[types.UID]v1.PodPhase{}
	m.Range(func(uid types.UID, st *v1.PodStatus) bool {
		got[uid] = st.Phase
		return true
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Range visited (-want +got):\n%s", diff)
	}
	n := 0
	m.Range(func(types.UID, *v1.PodStatus) bool { n++; return false })
	if n != 1 {
		t.Errorf("Range went on after false: %d calls, want 1", n)
	}
}

// TestManagerVersionsOnlySemanticChanges: a status equal to the last one
// in meaning (another time zone, an empty list for a nil one, a quantity
// in another format, a time that differs by less than its second) makes
// no new version; any change of a field does.
func TestManagerVersionsOnlySemanticChanges(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(now)})
	p := pod(v1.RestartPolicyAlways, nil, "a")
	base := func() v1.PodStatus {
		s := runningAs("fake://a-0")
		s.StartTime = &metav1.Time{Time: now.UTC()}
		s.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.Time{Time: now.UTC()}}}
		s.ContainerStatuses[0].AllocatedResources = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}
		return s
	}
	m.SetPodStatus(p, base())
	v := m.Version(p.UID)

	same := map[string]func(*v1.PodStatus){
		"the same status":           func(*v1.PodStatus) {},
		"times in another location": func(s *v1.PodStatus) { s.StartTime = &metav1.Time{Time: now.In(time.FixedZone("east", 3600))} },
		"an empty list for nil":     func(s *v1.PodStatus) { s.PodIPs = []v1.PodIP{} },
		"a fraction of a second":    func(s *v1.PodStatus) { s.Conditions[0].LastTransitionTime.Time = now.Add(time.Millisecond) },
		"a quantity in decimal": func(s *v1.PodStatus) {
			s.ContainerStatuses[0].AllocatedResources[v1.ResourceMemory] = *resource.NewQuantity(1<<30, resource.DecimalSI)
		},
	}
	for name, change := range same {
		s := base()
		change(&s)
		m.SetPodStatus(p, s)
		if got := m.Version(p.UID); got != v {
			t.Errorf("%s: version %d, want %d (no change)", name, got, v)
			v = got
		}
	}

	changed := map[string]func(*v1.PodStatus){
		"a message":         func(s *v1.PodStatus) { s.Message = "m" },
		"a condition":       func(s *v1.PodStatus) { s.Conditions[0].Status = v1.ConditionFalse },
		"a restart count":   func(s *v1.PodStatus) { s.ContainerStatuses[0].RestartCount = 1 },
		"a transition time": func(s *v1.PodStatus) { s.Conditions[0].LastTransitionTime.Time = now.Add(time.Second) },
		"a quantity's value": func(s *v1.PodStatus) {
			s.ContainerStatuses[0].AllocatedResources[v1.ResourceMemory] = resource.MustParse("2Gi")
		},
	}
	for name, change := range changed {
		s := base()
		change(&s)
		m.SetPodStatus(p, s)
		if got := m.Version(p.UID); got != v+1 {
			t.Errorf("%s: version %d, want %d", name, got, v+1)
		}
		m.SetPodStatus(p, base())
		v = m.Version(p.UID)
	}
}

// TestManagerNormalizesStatuses: the Manager keeps a status as the
// kubelet's status manager does, whatever its caller passed: times in
// whole seconds, regular and ephemeral container statuses by name, init
// containers' put in spec order, each terminated container's message cut to
// its share of 12 KiB on a character boundary; the caller's status is
// left as it was.
func TestManagerNormalizesStatuses(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(now)})
	p := pod(v1.RestartPolicyAlways, []string{"z-init", "a-init"}, "b", "a", "c") // 5 containers: 2457 bytes each
	frac := metav1.NewTime(now.Add(1500 * time.Millisecond))
	long := strings.Repeat("x", 2456) + "é" // the 2457th byte is inside "é"
	in := v1.PodStatus{
		StartTime:  &frac,
		Conditions: []v1.PodCondition{{Type: v1.PodReady, LastProbeTime: frac, LastTransitionTime: frac}},
		InitContainerStatuses: []v1.ContainerStatus{ // not in spec order
			{Name: "a-init", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: frac}}},
			{Name: "z-init", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{StartedAt: frac, FinishedAt: frac, Message: long}}},
		},
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "b", LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{FinishedAt: frac, Message: "short"}}},
			{Name: "a"}, {Name: "c"},
		},
		EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "y"}, {Name: "x"}},
	}
	keep := in.DeepCopy()
	m.SetPodStatus(p, in)
	got, _ := m.GetPodStatus(p.UID)

	names := func(l []v1.ContainerStatus) (out []string) {
		for _, c := range l {
			out = append(out, c.Name)
		}
		return out
	}
	if d := cmp.Diff([]string{"z-init", "a-init"}, names(got.InitContainerStatuses)); d != "" {
		t.Fatalf("init containers not in spec order (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"a", "b", "c"}, names(got.ContainerStatuses)); d != "" {
		t.Errorf("containers not by name (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"x", "y"}, names(got.EphemeralContainerStatuses)); d != "" {
		t.Errorf("ephemeral containers not by name (-want +got):\n%s", d)
	}
	sec := metav1.NewTime(now.Add(time.Second))
	for what, tm := range map[string]metav1.Time{
		"startTime":                          *got.StartTime,
		"lastProbeTime":                      got.Conditions[0].LastProbeTime,
		"lastTransitionTime":                 got.Conditions[0].LastTransitionTime,
		"an init container's startedAt":      got.InitContainerStatuses[1].State.Running.StartedAt,
		"a terminated container's startedAt": got.InitContainerStatuses[0].State.Terminated.StartedAt,
		"finishedAt":                         got.InitContainerStatuses[0].State.Terminated.FinishedAt,
		"a last termination's finishedAt":    got.ContainerStatuses[1].LastTerminationState.Terminated.FinishedAt,
	} {
		if !tm.Equal(&sec) {
			t.Errorf("%s: %v, want %v", what, tm.Time, sec.Time)
		}
	}
	if msg := got.InitContainerStatuses[0].State.Terminated.Message; msg != strings.Repeat("x", 2456) {
		t.Errorf("message cut to %d bytes, want 2456 (the share, less the split character)", len(msg))
	}
	if msg := got.ContainerStatuses[1].LastTerminationState.Terminated.Message; msg != "short" {
		t.Errorf("a short message became %q", msg)
	}
	if d := cmp.Diff(keep, &in); d != "" {
		t.Errorf("the caller's status was written (-before +after):\n%s", d)
	}
}

// TestPeekPodStatusStaysAsItWas: a status PeekPodStatus returned, which
// shares the Manager's memory, is never written by the Manager: a probe
// verdict and a new status leave it as it was, while GetPodStatus shows
// them.
func TestPeekPodStatusStaysAsItWas(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(now)})
	p := pod(v1.RestartPolicyAlways, nil, "a")
	s := runningAs("fake://a-0")
	started := true
	s.ContainerStatuses[0].Started = &started
	s.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
	m.SetPodStatus(p, s)
	peeked, ok := m.PeekPodStatus(p.UID)
	if !ok {
		t.Fatal("PeekPodStatus: no status of a recorded pod")
	}
	want := peeked.DeepCopy()

	m.SetContainerReadiness(p.UID, "fake://a-0", true)
	next := runningAs("fake://a-0")
	next.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	next.Message = "changed"
	m.SetPodStatus(p, next)

	if d := cmp.Diff(want, &peeked); d != "" {
		t.Errorf("the peeked status changed (-then +now):\n%s", d)
	}
	got, _ := m.GetPodStatus(p.UID)
	if got.Message != "changed" {
		t.Errorf("GetPodStatus: message %q, want the new status's", got.Message)
	}
	if _, ok := m.PeekPodStatus("unknown"); ok {
		t.Error("PeekPodStatus of an unknown pod reported a status")
	}
}

// TestManagerKeepsTheNewestObservedGeneration: a status generated from an
// older spec than the last one keeps the newer observed generation, and
// is no change when nothing else differs.
func TestManagerKeepsTheNewestObservedGeneration(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(now)})
	p := pod(v1.RestartPolicyAlways, nil, "a")
	at := func(gen int64) v1.PodStatus {
		s := runningAs("fake://a-0")
		s.ObservedGeneration = gen
		return s
	}
	m.SetPodStatus(p, at(5))
	v := m.Version(p.UID)
	m.SetPodStatus(p, at(4))
	if got, _ := m.GetPodStatus(p.UID); got.ObservedGeneration != 5 {
		t.Errorf("observedGeneration %d after a status of generation 4, want 5", got.ObservedGeneration)
	}
	if got := m.Version(p.UID); got != v {
		t.Errorf("version %d, want %d: an older generation alone is no change", got, v)
	}
	m.SetPodStatus(p, at(6))
	if got, _ := m.GetPodStatus(p.UID); got.ObservedGeneration != 6 {
		t.Errorf("observedGeneration %d, want 6", got.ObservedGeneration)
	}
}

// TestManagerKeepsItsOwnCopy: a caller that changes the status it passed
// (its slices, its conditions) does not change what the Manager keeps.
func TestManagerKeepsItsOwnCopy(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(now)})
	p := pod(v1.RestartPolicyAlways, nil, "a")
	s := runningAs("fake://a-0") // whole-second times: nothing to normalize
	s.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	m.SetPodStatus(p, s)
	s.ContainerStatuses[0].RestartCount = 9
	s.Conditions[0].Status = v1.ConditionFalse
	got, _ := m.GetPodStatus(p.UID)
	if got.ContainerStatuses[0].RestartCount != 0 || got.Conditions[0].Status != v1.ConditionTrue {
		t.Errorf("the caller's changes reached the Manager: restartCount %d, Ready %s", got.ContainerStatuses[0].RestartCount, got.Conditions[0].Status)
	}
}

// TestManagerHoldsBackATerminalPhaseWhileContainersMayRun checks the
// kubelet's status manager's rule: a terminal phase (and the node's
// DisruptionTarget) never reaches the sink while the pod's containers
// may still run; the sink gets the phase, reason and message it last
// accepted, and the whole status once the pod's worker has stopped it,
// at a Flush, even though the status itself did not change.
func TestManagerHoldsBackATerminalPhaseWhileContainersMayRun(t *testing.T) {
	ctx := context.Background()
	mayRun := true
	sink := &status.MemorySink{}
	m := status.New(status.Config{Sink: sink, CouldHaveRunningContainers: func(types.UID) bool { return mayRun }})
	p := pod(v1.RestartPolicyAlways, nil, "a")
	st := runningAs("fake://a-0")
	st.Reason, st.Message = "", ""
	m.SetPodStatus(p, st)
	if err := m.Flush(ctx, p.UID); err != nil {
		t.Fatal(err)
	}

	evicted := *st.DeepCopy()
	evicted.Phase, evicted.Reason, evicted.Message = v1.PodFailed, "Evicted", "The node was low on resource: memory."
	evicted.Conditions = append(evicted.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet})
	m.SetPodStatus(p, evicted)
	if err := m.Flush(ctx, p.UID); err != nil {
		t.Fatal(err)
	}
	got, _ := sink.Get(p.UID)
	if got.Phase != v1.PodRunning || got.Reason != "" || got.Message != "" {
		t.Errorf("while containers may run the sink got phase %s, reason %q, message %q; want Running, none, none", got.Phase, got.Reason, got.Message)
	}
	for _, c := range got.Conditions {
		if c.Type == v1.DisruptionTarget {
			t.Error("while containers may run the sink got the DisruptionTarget condition")
		}
	}
	if len(got.ContainerStatuses) != 1 {
		t.Errorf("the held-back status lost the rest of the status: %d container statuses", len(got.ContainerStatuses))
	}
	if mine, _ := m.GetPodStatus(p.UID); mine.Phase != v1.PodFailed {
		t.Errorf("the Manager's own status is %s, want Failed: only the sink's is held back", mine.Phase)
	}
	updates := sink.Updates()
	if err := m.Flush(ctx, p.UID); err != nil || sink.Updates() != updates+1 {
		t.Errorf("a Flush of a status still held back: err %v, %d sink calls, want 1", err, sink.Updates()-updates)
	}

	mayRun = false
	if err := m.Flush(ctx, p.UID); err != nil {
		t.Fatal(err)
	}
	got, _ = sink.Get(p.UID)
	if got.Phase != v1.PodFailed || got.Reason != "Evicted" || len(got.Conditions) != len(evicted.Conditions) {
		t.Errorf("once stopped the sink got phase %s, reason %q, %d conditions; want Failed, Evicted, %d", got.Phase, got.Reason, len(got.Conditions), len(evicted.Conditions))
	}
	updates = sink.Updates()
	if err := m.Flush(ctx, p.UID); err != nil || sink.Updates() != updates {
		t.Errorf("a Flush of a status the sink has whole: err %v, %d sink calls, want none", err, sink.Updates()-updates)
	}
}

// TestManagerHoldsBackAFirstTerminalStatusAsPending checks the phase the
// sink gets for a terminal status held back before it accepted any, and
// that Run's pushes hold back as Flush does.
func TestManagerHoldsBackAFirstTerminalStatusAsPending(t *testing.T) {
	got := make(chan v1.PodStatus, 1)
	m := status.New(status.Config{CouldHaveRunningContainers: func(types.UID) bool { return true },
		Sink: status.SinkFunc(func(_ context.Context, _ *v1.Pod, st v1.PodStatus) error {
			got <- st
			return nil
		})})
	runManager(t, m)
	p := pod(v1.RestartPolicyNever, nil, "a")
	m.SetPodStatus(p, v1.PodStatus{Phase: v1.PodSucceeded, Reason: "r"})
	if st := <-got; st.Phase != v1.PodPending || st.Reason != "" {
		t.Errorf("the sink got phase %s, reason %q; want Pending, none", st.Phase, st.Reason)
	}
}

// TestManagerRetriesAFailedFlush checks that a Flush the sink refuses,
// of a status it has held back, has Run try the status again after its
// retry period (not at once), whole.
func TestManagerRetriesAFailedFlush(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	calls := make(chan v1.PodPhase, 4)
	refuse := false
	mayRun := true
	var mu sync.Mutex
	m := status.New(status.Config{Clock: clk, RetryPeriod: 5 * time.Second,
		CouldHaveRunningContainers: func(types.UID) bool { mu.Lock(); defer mu.Unlock(); return mayRun },
		Sink: status.SinkFunc(func(_ context.Context, _ *v1.Pod, st v1.PodStatus) error {
			mu.Lock()
			defer mu.Unlock()
			calls <- st.Phase
			if refuse {
				return errors.New("refused")
			}
			return nil
		})})
	runManager(t, m)
	p := pod(v1.RestartPolicyNever, nil, "a")
	m.SetPodStatus(p, v1.PodStatus{Phase: v1.PodSucceeded})
	if phase := <-calls; phase != v1.PodPending {
		t.Fatalf("Run sent phase %s held back, want Pending", phase)
	}
	mu.Lock()
	mayRun, refuse = false, true
	mu.Unlock()
	if err := m.Flush(context.Background(), p.UID); err == nil {
		t.Fatal("Flush returned no error from a sink that refused")
	}
	<-calls
	mu.Lock()
	refuse = false
	mu.Unlock()
	waitForWaiter(t, clk) // Run's retry, armed by the failed Flush
	select {
	case phase := <-calls:
		t.Fatalf("Run sent phase %s at once after the failed Flush, want it after the retry period", phase)
	default:
	}
	clk.Step(5 * time.Second)
	select {
	case phase := <-calls:
		if phase != v1.PodSucceeded {
			t.Errorf("Run sent phase %s after the failed Flush, want Succeeded", phase)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not send the status again at its retry after a failed Flush")
	}
}

// TestManagerResendsAHeldBackStatus checks that Resend has Run send a
// held-back status again, whole once the pod can no longer run
// containers, and does nothing for a status the sink has whole.
func TestManagerResendsAHeldBackStatus(t *testing.T) {
	calls := make(chan v1.PodPhase, 4)
	var mu sync.Mutex
	mayRun := true
	m := status.New(status.Config{
		CouldHaveRunningContainers: func(types.UID) bool { mu.Lock(); defer mu.Unlock(); return mayRun },
		Sink: status.SinkFunc(func(_ context.Context, _ *v1.Pod, st v1.PodStatus) error {
			calls <- st.Phase
			return nil
		})})
	runManager(t, m)
	p := pod(v1.RestartPolicyNever, nil, "a")
	m.SetPodStatus(p, runningAs("fake://a-0"))
	<-calls
	m.SetPodStatus(p, v1.PodStatus{Phase: v1.PodSucceeded})
	if phase := <-calls; phase != v1.PodRunning {
		t.Fatalf("the sink got %s while the pod may run, want Running", phase)
	}
	mu.Lock()
	mayRun = false
	mu.Unlock()
	m.Resend(p.UID)
	select {
	case phase := <-calls:
		if phase != v1.PodSucceeded {
			t.Errorf("after Resend the sink got %s, want Succeeded", phase)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Resend sent nothing within 10s")
	}
	m.Resend(p.UID)
	if err := m.Flush(context.Background(), p.UID); err != nil {
		t.Fatal(err)
	}
	select {
	case phase := <-calls:
		t.Errorf("a Resend of a status the sink has whole sent %s", phase)
	default:
	}
}

// A Resend made while the sink is being sent a status that gets held
// back is not lost: once that call ends, the status goes again, whole if
// the pod can no longer have running containers. The agent's Resend, as
// a worker stops its pod, may meet the push of its final status.
func TestManagerResendDuringAHeldBackPushIsKept(t *testing.T) {
	calls := make(chan v1.PodPhase, 4)
	inSink, release := make(chan struct{}, 1), make(chan struct{})
	var mu sync.Mutex
	mayRun, block := true, false
	m := status.New(status.Config{
		CouldHaveRunningContainers: func(types.UID) bool { mu.Lock(); defer mu.Unlock(); return mayRun },
		Sink: status.SinkFunc(func(_ context.Context, _ *v1.Pod, st v1.PodStatus) error {
			mu.Lock()
			b := block
			mu.Unlock()
			if b {
				inSink <- struct{}{}
				<-release
			}
			calls <- st.Phase
			return nil
		})})
	runManager(t, m)
	p := pod(v1.RestartPolicyNever, nil, "a")
	m.SetPodStatus(p, runningAs("fake://a-0"))
	<-calls
	mu.Lock()
	block = true
	mu.Unlock()
	m.SetPodStatus(p, v1.PodStatus{Phase: v1.PodSucceeded})
	<-inSink // the held-back status is being sent
	mu.Lock()
	mayRun, block = false, false
	mu.Unlock()
	m.Resend(p.UID)
	close(release)
	if phase := <-calls; phase != v1.PodRunning {
		t.Fatalf("the sink got %s while the pod may run, want Running", phase)
	}
	select {
	case phase := <-calls:
		if phase != v1.PodSucceeded {
			t.Errorf("after Resend the sink got %s, want Succeeded", phase)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Resend made during the held-back push sent nothing within 10s")
	}
}

// TestManagerHoldsBackToThePodsOwnPhase checks the phase the sink gets
// held back before it accepted any status: the pod's own (the API
// server's), as the kubelet keeps the API's; and that a pod whose own
// status is terminal already is not held back.
func TestManagerHoldsBackToThePodsOwnPhase(t *testing.T) {
	sink := &status.MemorySink{}
	m := status.New(status.Config{Sink: sink, CouldHaveRunningContainers: func(types.UID) bool { return true }})
	running := pod(v1.RestartPolicyNever, nil, "a")
	running.Status = v1.PodStatus{Phase: v1.PodRunning}
	done := pod(v1.RestartPolicyNever, nil, "a")
	done.UID = "done"
	done.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}
	for _, p := range []*v1.Pod{running, done} {
		m.SetPodStatus(p, v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"})
		if err := m.Flush(context.Background(), p.UID); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := sink.Get(running.UID); got.Phase != v1.PodRunning || got.Reason != "" {
		t.Errorf("a pod the API shows Running: the sink got %s %q held back, want Running", got.Phase, got.Reason)
	}
	if got, _ := sink.Get(done.UID); got.Phase != v1.PodFailed || got.Reason != "Evicted" {
		t.Errorf("a pod the API shows Failed: the sink got %s %q, want Failed Evicted", got.Phase, got.Reason)
	}
}

// TestManagerRefusesAnIllegalContainerTransition checks the kubelet's
// status manager's guard: a status showing a container the last status
// showed terminated as no longer terminated, when nothing restarts it,
// is dropped, and the last status kept.
func TestManagerRefusesAnIllegalContainerTransition(t *testing.T) {
	never, onFailure, always := v1.RestartPolicyNever, v1.RestartPolicyOnFailure, v1.RestartPolicyAlways
	ownAlways := v1.ContainerRestartPolicyAlways
	withInit := func(p *v1.Pod, sidecar bool) *v1.Pod {
		p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "img"}}
		if sidecar {
			p.Spec.InitContainers[0].RestartPolicy = &ownAlways
		}
		return p
	}
	restartAll := func(p *v1.Pod) *v1.Pod {
		p.Spec.Containers[0].RestartPolicy = &ownAlways
		p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
		return p
	}
	ownPolicy := func(p *v1.Pod) *v1.Pod {
		p.Spec.Containers[0].RestartPolicy = &ownAlways
		return p
	}
	terminated := func(code int32) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}
	}
	runningState := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		init    bool // the transition is the init container's
		exit    int32
		allowed bool
	}{
		{"Never, exited 0", pod(never, nil, "a"), false, 0, false},
		{"Never, exited 1", pod(never, nil, "a"), false, 1, false},
		{"OnFailure, exited 0", pod(onFailure, nil, "a"), false, 0, false},
		{"OnFailure, exited 1", pod(onFailure, nil, "a"), false, 1, true},
		{"Always", pod(always, nil, "a"), false, 0, true},
		{"Never, the container's own policy Always", ownPolicy(pod(never, nil, "a")), false, 0, true},
		{"Never, a RestartAllContainers rule", restartAll(pod(never, nil, "a")), false, 0, true},
		{"Never, init container", withInit(pod(never, nil, "a"), false), true, 0, false},
		{"Never, sidecar", withInit(pod(never, nil, "a"), true), true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := status.New(status.Config{})
			before := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "a", State: terminated(tc.exit)}}}
			if tc.init {
				before.ContainerStatuses[0].State = runningState
				before.InitContainerStatuses = []v1.ContainerStatus{{Name: "i", State: terminated(tc.exit)}}
			}
			m.SetPodStatus(tc.pod, before)
			after := *before.DeepCopy()
			after.Phase = v1.PodPending
			if tc.init {
				after.InitContainerStatuses[0].State = runningState
			} else {
				after.ContainerStatuses[0].State = runningState
			}
			m.SetPodStatus(tc.pod, after)
			got, _ := m.GetPodStatus(tc.pod.UID)
			if kept := got.Phase == v1.PodPending; kept != tc.allowed {
				t.Errorf("the status was recorded: %v, want %v", kept, tc.allowed)
			}
			if want := uint64(1); !tc.allowed && m.Version(tc.pod.UID) != want {
				t.Errorf("version %d after a refused status, want %d", m.Version(tc.pod.UID), want)
			}
		})
	}
}

// TestManagerChecksAFirstStatusAgainstThePodsOwn checks that, before the
// Manager has a status of a pod, the pod's own status (the API server's)
// is the one a status is checked against, as in the kubelet.
func TestManagerChecksAFirstStatusAgainstThePodsOwn(t *testing.T) {
	m := status.New(status.Config{})
	p := pod(v1.RestartPolicyNever, nil, "a")
	p.Status = v1.PodStatus{Phase: v1.PodSucceeded, ContainerStatuses: []v1.ContainerStatus{{Name: "a",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}}}
	m.SetPodStatus(p, runningAs("fake://a-1"))
	if st, ok := m.GetPodStatus(p.UID); ok {
		t.Errorf("recorded %s, want the status dropped: the pod's own status shows its container ended", st.Phase)
	}
}

// TestManagerCountsTerminations checks kubelet_terminated_containers_total:
// a termination counts once, as a recorded status first shows it, by
// kind, exit code and reason; one the pod's own status already shows
// does not count.
func TestManagerCountsTerminations(t *testing.T) {
	m := status.New(status.Config{})
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	ended := func(code int32, reason string) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, Reason: reason}}
	}
	p := pod(v1.RestartPolicyAlways, []string{"i"}, "a", "b")
	st := v1.PodStatus{Phase: v1.PodPending,
		InitContainerStatuses: []v1.ContainerStatus{{Name: "i", State: ended(0, "Completed")}},
		ContainerStatuses:     []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}, {Name: "b"}}}
	m.SetPodStatus(p, st)
	st = *st.DeepCopy()
	st.Phase = v1.PodRunning
	st.ContainerStatuses[0].State = ended(137, "Error")
	m.SetPodStatus(p, st)
	st = *st.DeepCopy()
	st.ContainerStatuses[0].Ready = true // still the same termination
	m.SetPodStatus(p, st)

	st = *st.DeepCopy()
	st.EphemeralContainerStatuses = []v1.ContainerStatus{{Name: "debug", State: ended(2, "Error")}}
	m.SetPodStatus(p, st)

	q := pod(v1.RestartPolicyNever, nil, "c")
	q.UID = "other"
	q.Status = v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: ended(1, "Error")}}}
	m.SetPodStatus(q, *q.Status.DeepCopy())

	want := `
# HELP kubelet_terminated_containers_total Cumulative number of container terminations.
# TYPE kubelet_terminated_containers_total counter
kubelet_terminated_containers_total{container_type="container",exit_code="137",reason="Error"} 1
kubelet_terminated_containers_total{container_type="ephemeral_container",exit_code="2",reason="Error"} 1
kubelet_terminated_containers_total{container_type="init_container",exit_code="0",reason="Completed"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_terminated_containers_total"); err != nil {
		t.Error(err)
	}
}

// reconcilingSink is a MemorySink whose store, per pod, is what it last
// accepted unless a test changed it, as another writer changes an API
// server's status.
type reconcilingSink struct {
	status.MemorySink
	asked int
}

func (s *reconcilingSink) NeedsReconcile(pod *v1.Pod, st v1.PodStatus) bool {
	s.asked++
	return pod.Status.Phase != st.Phase
}

// TestManagerReconcilesAStatusChangedElsewhere checks Reconcile: a
// Reconciler sink that finds its store's status differs gets the status
// again; one that finds it the same, a status still unsent and a status
// held back get nothing more; a plain Sink is never asked.
func TestManagerReconcilesAStatusChangedElsewhere(t *testing.T) {
	ctx := context.Background()
	sink := &reconcilingSink{}
	mayRun := false
	clk := clocktesting.NewFakeClock(now)
	m := status.New(status.Config{Sink: sink, Clock: clk, CouldHaveRunningContainers: func(types.UID) bool { return mayRun }})
	p := pod(v1.RestartPolicyAlways, nil, "a")
	m.SetPodStatus(p, runningAs("fake://a-0"))
	if err := m.Flush(ctx, p.UID); err != nil {
		t.Fatal(err)
	}
	flushed := func() int {
		t.Helper()
		n := sink.Updates()
		if err := m.Flush(ctx, p.UID); err != nil {
			t.Fatal(err)
		}
		return sink.Updates() - n
	}

	same := p.DeepCopy()
	same.Status.Phase = v1.PodRunning
	m.Reconcile(same)
	if n := flushed(); n != 0 {
		t.Errorf("a store that has the status: %d sink calls, want 0", n)
	}
	changed := p.DeepCopy()
	changed.Status.Phase = v1.PodPending // another writer's
	m.Reconcile(changed)
	if n := flushed(); n != 1 {
		t.Errorf("a store whose status another writer changed: %d sink calls, want 1", n)
	}
	// Again within ReconcileInterval: written only at the pod's first
	// SetPodStatus once the interval has passed.
	m.Reconcile(changed)
	if n := flushed(); n != 0 {
		t.Errorf("a second difference within the interval: %d sink calls, want 0", n)
	}
	clk.Step(status.ReconcileInterval - time.Second)
	m.SetPodStatus(p, runningAs("fake://a-0"))
	if n := flushed(); n != 0 {
		t.Errorf("a SetPodStatus within the interval: %d sink calls, want 0", n)
	}
	clk.Step(time.Second)
	m.SetPodStatus(p, runningAs("fake://a-0"))
	if n := flushed(); n != 1 {
		t.Errorf("the first SetPodStatus past the interval: %d sink calls, want 1", n)
	}
	// A status not yet sent is left to its push: the sink is not asked.
	m.SetPodStatus(p, runningAs("fake://a-1"))
	asked := sink.asked
	clk.Step(status.ReconcileInterval)
	m.Reconcile(changed)
	if sink.asked != asked {
		t.Error("the sink was asked about a status not yet sent")
	}
	if n := flushed(); n != 1 {
		t.Errorf("the unsent status: %d sink calls, want 1", n)
	}

	mayRun = true
	m.SetPodStatus(p, v1.PodStatus{Phase: v1.PodFailed})
	if err := m.Flush(ctx, p.UID); err != nil {
		t.Fatal(err)
	}
	asked = sink.asked
	m.Reconcile(changed)
	if sink.asked != asked {
		t.Error("a status held back was reconciled")
	}

	plain := status.New(status.Config{Sink: &status.MemorySink{}})
	plain.SetPodStatus(p, runningAs("fake://a-0"))
	plain.Reconcile(changed) // nothing to ask; must not panic
}

// TestManagerIgnoresOthersConditionsAlone checks that a status differing
// from the last only in other components' conditions (a readiness
// gate's) makes no new version, as in the kubelet's status manager,
// while one whose DisruptionTarget changed does.
func TestManagerIgnoresOthersConditionsAlone(t *testing.T) {
	m := status.New(status.Config{})
	p := pod(v1.RestartPolicyAlways, nil, "a")
	st := runningAs("fake://a-0")
	m.SetPodStatus(p, st)
	gated := *st.DeepCopy()
	gated.Conditions = append(gated.Conditions, v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue})
	m.SetPodStatus(p, gated)
	if v := m.Version(p.UID); v != 1 {
		t.Errorf("a gate's condition alone: version %d, want 1", v)
	}
	disrupted := *gated.DeepCopy()
	disrupted.Conditions = append(disrupted.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue})
	m.SetPodStatus(p, disrupted)
	if v := m.Version(p.UID); v != 2 {
		t.Errorf("a DisruptionTarget: version %d, want 2", v)
	}
}

// TestManagerFlushWaitsForTheSinkOnlyAsLongAsItsContext checks that a
// Flush behind a sink call under way returns when its ctx ends, and
// that the pod's status is then sent once the sink is free.
func TestManagerFlushWaitsForTheSinkOnlyAsLongAsItsContext(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	sent := map[types.UID]int{}
	m := status.New(status.Config{Sink: status.SinkFunc(func(_ context.Context, p *v1.Pod, _ v1.PodStatus) error {
		if p.UID == "busy" {
			entered <- struct{}{}
			<-release
		}
		mu.Lock()
		sent[p.UID]++
		mu.Unlock()
		return nil
	})})
	runManager(t, m)
	busy := pod(v1.RestartPolicyAlways, nil, "a")
	busy.UID = "busy"
	m.SetPodStatus(busy, runningAs("fake://a-0"))
	<-entered // Run's call for busy holds the sink
	p := pod(v1.RestartPolicyAlways, nil, "a")
	m.SetPodStatus(p, runningAs("fake://a-1"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Flush(ctx, p.UID); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush behind a busy sink with its ctx ended: %v, want context.Canceled", err)
	}
	close(release)
	if err := m.Flush(context.Background(), p.UID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if sent[p.UID] != 1 {
		t.Errorf("the pod's status was sent %d times, want 1", sent[p.UID])
	}
}
