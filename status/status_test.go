package status_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func pod(policy v1.RestartPolicy, inits []string, containers ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"}, Spec: v1.PodSpec{RestartPolicy: policy}}
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "img"})
	}
	for _, n := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img"})
	}
	return p
}

func c(name string, state runtime.ContainerState, exit, restarts int) *runtime.ContainerStatus {
	return &runtime.ContainerStatus{ID: runtime.ContainerID{Type: "fake", ID: name + "-" + string(rune('0'+restarts))}, Name: name, State: state, ExitCode: exit, RestartCount: restarts, StartedAt: now, FinishedAt: now}
}

func observed(containers ...*runtime.ContainerStatus) *runtime.PodStatus {
	return &runtime.PodStatus{
		IPs:               []string{"127.88.0.1"},
		SandboxStatuses:   []*runtime.SandboxStatus{{ID: "sb", State: runtime.SandboxStateReady, IPs: []string{"127.88.0.1"}}},
		ContainerStatuses: containers,
	}
}

const (
	running = runtime.ContainerStateRunning
	exited  = runtime.ContainerStateExited
)

func TestPhase(t *testing.T) {
	always, onFailure, never := v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		obs     *runtime.PodStatus
		waiting map[string]status.Reason
		want    v1.PodPhase
	}{
		{"nothing yet", pod(always, nil, "a"), observed(), nil, v1.PodPending},
		{"all running", pod(always, nil, "a", "b"), observed(c("a", running, 0, 0), c("b", running, 0, 0)), nil, v1.PodRunning},
		{"one not started yet", pod(always, nil, "a", "b"), observed(c("a", running, 0, 0)), nil, v1.PodPending},
		{"image pull failing", pod(always, nil, "a"), observed(), map[string]status.Reason{"a": {Reason: "ErrImagePull"}}, v1.PodPending},
		{"init running", pod(always, []string{"i"}, "a"), observed(c("i", running, 0, 0)), nil, v1.PodPending},
		{"init failed, Never", pod(never, []string{"i"}, "a"), observed(c("i", exited, 1, 0)), nil, v1.PodFailed},
		{"init failed, OnFailure", pod(onFailure, []string{"i"}, "a"), observed(c("i", exited, 1, 0)), nil, v1.PodPending},
		{"init done, app running", pod(never, []string{"i"}, "a"), observed(c("a", running, 0, 0), c("i", exited, 0, 0)), nil, v1.PodRunning},
		{"Always, all exited", pod(always, nil, "a"), observed(c("a", exited, 0, 0)), nil, v1.PodRunning},
		{"Always, crash looping", pod(always, nil, "a"), observed(c("a", exited, 1, 3)), map[string]status.Reason{"a": {Reason: "CrashLoopBackOff"}}, v1.PodRunning},
		{"OnFailure, all succeeded", pod(onFailure, nil, "a", "b"), observed(c("a", exited, 0, 0), c("b", exited, 0, 0)), nil, v1.PodSucceeded},
		{"OnFailure, one failed", pod(onFailure, nil, "a", "b"), observed(c("a", exited, 0, 0), c("b", exited, 1, 0)), nil, v1.PodRunning},
		{"Never, all succeeded", pod(never, nil, "a"), observed(c("a", exited, 0, 0)), nil, v1.PodSucceeded},
		{"Never, one failed", pod(never, nil, "a", "b"), observed(c("a", exited, 0, 0), c("b", exited, 2, 0)), nil, v1.PodFailed},
		{"Never, one still running", pod(never, nil, "a", "b"), observed(c("a", exited, 2, 0), c("b", running, 0, 0)), nil, v1.PodRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := status.Generate(status.Input{Pod: tc.pod, Runtime: tc.obs, Waiting: tc.waiting, Now: now})
			if got.Phase != tc.want {
				t.Errorf("phase %s, want %s", got.Phase, tc.want)
			}
		})
	}
}

func TestPodIPKeptAfterTheSandboxStops(t *testing.T) {
	p := pod(v1.RestartPolicyNever, nil, "a")
	first := status.Generate(status.Input{Pod: p, Runtime: observed(c("a", running, 0, 0)), Now: now})
	stopped := &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{c("a", exited, 0, 0)}}
	got := status.Generate(status.Input{Pod: p, Runtime: stopped, Previous: &first, Now: now})
	if got.PodIP != "127.88.0.1" || len(got.PodIPs) != 1 {
		t.Errorf("pod IP %q %v after the sandbox stopped, want the last known", got.PodIP, got.PodIPs)
	}
}

func TestTerminalPhaseNeverChanges(t *testing.T) {
	p := pod(v1.RestartPolicyNever, nil, "a")
	prev := &v1.PodStatus{Phase: v1.PodSucceeded}
	got := status.Generate(status.Input{Pod: p, Runtime: observed(c("a", running, 0, 0)), Previous: prev, Now: now})
	if got.Phase != v1.PodSucceeded {
		t.Errorf("phase %s after Succeeded, want Succeeded", got.Phase)
	}
}

func condition(s v1.PodStatus, t v1.PodConditionType) v1.PodCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}

func TestContainerStatusesAndConditions(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, []string{"init"}, "web", "crasher", "probed")
	p.Spec.Containers[2].ReadinessProbe = &v1.Probe{}
	obs := observed(
		c("probed", running, 0, 0),
		c("crasher", exited, 1, 4), c("crasher", exited, 1, 3),
		c("web", running, 0, 1), c("web", exited, 137, 0),
		c("init", exited, 0, 0),
	)
	s := status.Generate(status.Input{Pod: p, Runtime: obs, Now: now, NodeIPs: []string{"127.0.0.1"},
		Waiting: map[string]status.Reason{"crasher": {Reason: "CrashLoopBackOff", Message: "back-off 40s"}}})

	web, crasher, probed := s.ContainerStatuses[0], s.ContainerStatuses[1], s.ContainerStatuses[2]
	if web.State.Running == nil || web.RestartCount != 1 || web.LastTerminationState.Terminated == nil || web.LastTerminationState.Terminated.ExitCode != 137 || !web.Ready {
		t.Errorf("web: %+v", web)
	}
	if web.ContainerID != "fake://web-1" {
		t.Errorf("web container ID %q", web.ContainerID)
	}
	if w := crasher.State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" || crasher.LastTerminationState.Terminated == nil || crasher.LastTerminationState.Terminated.ExitCode != 1 || crasher.RestartCount != 4 {
		t.Errorf("crasher: %+v", crasher)
	}
	if probed.Ready || probed.Started == nil || !*probed.Started {
		t.Errorf("probed without a verdict: ready %v started %v, want not ready but started", probed.Ready, probed.Started)
	}
	if s.PodIP != "127.88.0.1" || s.HostIP != "127.0.0.1" || s.QOSClass != v1.PodQOSBestEffort || s.StartTime == nil {
		t.Errorf("ips %q %q qos %s start %v", s.PodIP, s.HostIP, s.QOSClass, s.StartTime)
	}
	for typ, want := range map[v1.PodConditionType]v1.ConditionStatus{
		v1.PodReadyToStartContainers: v1.ConditionTrue, v1.PodInitialized: v1.ConditionTrue,
		v1.ContainersReady: v1.ConditionFalse, v1.PodReady: v1.ConditionFalse, v1.PodScheduled: v1.ConditionTrue,
	} {
		if got := condition(s, typ); got.Status != want {
			t.Errorf("condition %s = %s, want %s", typ, got.Status, want)
		}
	}

	// Readiness verdicts make the pod Ready once every container is.
	ready := map[string]bool{"fake://probed-0": true}
	obs.ContainerStatuses[1] = c("crasher", running, 0, 5)
	later := now.Add(time.Minute)
	s2 := status.Generate(status.Input{Pod: p, Runtime: obs, Previous: &s, Ready: ready, Now: later})
	if got := condition(s2, v1.PodReady); got.Status != v1.ConditionTrue || !got.LastTransitionTime.Time.Equal(later) {
		t.Errorf("Ready %+v, want True since %v", got, later)
	}
	if got := condition(s2, v1.PodScheduled); !got.LastTransitionTime.Time.Equal(now) {
		t.Errorf("an unchanged condition moved its transition time to %v", got.LastTransitionTime)
	}
}

func TestInitializingContainersWait(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, []string{"i"}, "a")
	s := status.Generate(status.Input{Pod: p, Runtime: observed(c("i", running, 0, 0)), Now: now})
	if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "PodInitializing" {
		t.Errorf("app while init runs: %+v, want waiting PodInitializing", s.ContainerStatuses[0].State)
	}
	if got := condition(s, v1.PodInitialized); got.Status != v1.ConditionFalse || got.Reason != "ContainersNotInitialized" {
		t.Errorf("Initialized %+v", got)
	}
}

func TestReadinessGates(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, nil, "a")
	p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	s := status.Generate(status.Input{Pod: p, Runtime: observed(c("a", running, 0, 0)), Now: now})
	if got := condition(s, v1.PodReady); got.Status != v1.ConditionFalse || got.Reason != "ReadinessGatesNotReady" {
		t.Errorf("Ready with an unmet gate: %+v", got)
	}
	p.Status.Conditions = []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionTrue}}
	s = status.Generate(status.Input{Pod: p, Runtime: observed(c("a", running, 0, 0)), Now: now})
	if got := condition(s, v1.PodReady); got.Status != v1.ConditionTrue {
		t.Errorf("Ready with the gate met: %+v", got)
	}
}

func TestManagerPushesChangesToTheSink(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	var sink status.MemorySink
	pushed := make(chan struct{}, 16)
	m := status.New(status.Config{Clock: clk, Sink: status.SinkFunc(func(ctx context.Context, p *v1.Pod, s v1.PodStatus) error {
		err := sink.UpdatePodStatus(ctx, p, s)
		pushed <- struct{}{}
		return err
	})})
	runManager(t, m)

	p := pod(v1.RestartPolicyAlways, nil, "a")
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
	s := status.Generate(status.Input{Pod: p, Runtime: observed(c("a", running, 0, 0)), Now: now})
	m.SetPodStatus(p, s)
	<-pushed
	m.SetPodStatus(p, s) // unchanged: no new version, nothing sent
	if m.Version(p.UID) != 1 {
		t.Errorf("version %d after an unchanged update, want 1", m.Version(p.UID))
	}

	m.SetContainerReadiness(p.UID, "fake://a-0", true)
	<-pushed
	got, _ := sink.Get(p.UID)
	if !got.ContainerStatuses[0].Ready || condition(got, v1.PodReady).Status != v1.ConditionTrue {
		t.Errorf("after a readiness verdict the sink has ready=%v Ready=%s", got.ContainerStatuses[0].Ready, condition(got, v1.PodReady).Status)
	}
	if m.Version(p.UID) != 2 || sink.Updates() != 2 {
		t.Errorf("version %d, %d updates, want 2 and 2", m.Version(p.UID), sink.Updates())
	}
	if ready, _ := m.VerdictsFor([]string{"fake://a-0", "fake://other"}); !ready["fake://a-0"] || len(ready) != 1 {
		t.Error("the verdict is not kept for the next generation")
	}
	if pods := m.Pods(); len(pods) != 1 || !pods[0].Status.ContainerStatuses[0].Ready {
		t.Errorf("Pods() = %v", pods)
	}
	m.RemovePod(p.UID)
	if _, ok := m.GetPodStatus(p.UID); ok {
		t.Error("status kept after RemovePod")
	}
}

func TestManagerRetriesAFailedPush(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	calls := make(chan error, 4)
	fail := true
	m := status.New(status.Config{Clock: clk, RetryPeriod: 5 * time.Second, Sink: status.SinkFunc(func(context.Context, *v1.Pod, v1.PodStatus) error {
		var err error
		if fail {
			err = context.DeadlineExceeded
			fail = false
		}
		calls <- err
		return err
	})})
	runManager(t, m)
	p := pod(v1.RestartPolicyAlways, nil, "a")
	m.SetPodStatus(p, status.Generate(status.Input{Pod: p, Now: now}))
	if err := <-calls; err == nil {
		t.Fatal("first push succeeded")
	}
	waitForWaiter(t, clk)
	clk.Step(5 * time.Second)
	if err := <-calls; err != nil {
		t.Fatalf("retry: %v", err)
	}
}

func TestSidecarPhases(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	p := pod(v1.RestartPolicyNever, []string{"proxy"}, "app")
	p.Spec.InitContainers[0].RestartPolicy = &always
	p.Spec.InitContainers[0].StartupProbe = &v1.Probe{}
	proxy := c("proxy", running, 0, 0)
	started := map[string]bool{proxy.ID.String(): true}
	for _, tc := range []struct {
		name    string
		obs     *runtime.PodStatus
		started map[string]bool
		phase   v1.PodPhase
		init    v1.ConditionStatus
	}{
		{"sidecar not started yet", observed(proxy), nil, v1.PodPending, v1.ConditionFalse},
		{"sidecar started, app running", observed(c("app", running, 0, 0), proxy), started, v1.PodRunning, v1.ConditionTrue},
		{"app done under Never, sidecar still running", observed(c("app", exited, 0, 0), proxy), started, v1.PodRunning, v1.ConditionTrue},
		{"app failed under Never, sidecar still running", observed(c("app", exited, 1, 0), proxy), started, v1.PodRunning, v1.ConditionTrue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.Generate(status.Input{Pod: p, Runtime: tc.obs, Started: tc.started, Now: now})
			if s.Phase != tc.phase {
				t.Errorf("phase %s, want %s", s.Phase, tc.phase)
			}
			if got := condition(s, v1.PodInitialized).Status; got != tc.init {
				t.Errorf("Initialized %s, want %s", got, tc.init)
			}
		})
	}
}

// As the kubelet's generateAPIPodStatus: the conditions of the pod's own
// status that the kubelet does not own are kept as they are, first; the
// ones it owns are made anew.
func TestGenerateKeepsOthersConditions(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, nil, "a")
	p.Generation = 3
	gate := v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue, ObservedGeneration: 1,
		LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
	taint := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "DeletionByTaintManager"}
	p.Status.Conditions = []v1.PodCondition{gate, {Type: v1.PodReady, Status: v1.ConditionTrue, Reason: "stale"}, taint}
	got := status.Generate(status.Input{Pod: p, Runtime: observed(c("a", running, 0, 0)), Now: now})
	if len(got.Conditions) < 2 || !reflect.DeepEqual(got.Conditions[:2], []v1.PodCondition{gate, taint}) {
		t.Fatalf("conditions %+v, want the gate's and DisruptionTarget first, as they were", got.Conditions)
	}
	for _, c := range got.Conditions[2:] {
		if !status.OwnedByKubelet(c.Type) {
			t.Errorf("condition %s twice", c.Type)
		}
		if c.Type == v1.PodReady && c.Reason == "stale" {
			t.Error("the pod's own Ready was kept, want it made anew")
		}
		if c.ObservedGeneration != 3 {
			t.Errorf("%s observedGeneration %d, want 3", c.Type, c.ObservedGeneration)
		}
	}
}

// As the kubelet: PodResizeInProgress keeps the generation at which its
// resize was accepted, while every other condition observes the pod's.
func TestResizeInProgressKeepsItsGeneration(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, nil, "a")
	p.Generation = 5
	got := status.Generate(status.Input{Pod: p, Runtime: observed(c("a", running, 0, 0)), Now: now,
		ResizeInProgress: &status.Reason{}, ResizePending: &status.Reason{Reason: v1.PodReasonDeferred}, ResizeAcceptedGeneration: 3})
	seen := false
	for _, c := range got.Conditions {
		want := int64(5)
		if c.Type == v1.PodResizeInProgress {
			want, seen = 3, true
		}
		if c.ObservedGeneration != want {
			t.Errorf("%s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, want)
		}
	}
	if !seen {
		t.Fatal("no PodResizeInProgress condition")
	}
}
