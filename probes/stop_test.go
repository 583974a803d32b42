package probes_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/probes"
)

func (w *world) setStatus(s v1.PodStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status = s
}

// drain returns the updates queued so far, after every worker went idle
// or stopped.
func (e *env) drain() []string {
	e.t.Helper()
	e.settle()
	var got []string
	for {
		select {
		case u := <-e.m.Updates():
			got = append(got, fmt.Sprintf("%s %s %s", u.Container, u.Type, u.Result))
		default:
			return got
		}
	}
}

func runningState() v1.ContainerState {
	return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}
}

func exited(code int32) v1.ContainerState {
	return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}
}

// TestWorkersStopByThemselves replays the kubelet worker's stop rules: a
// terminal pod is never probed, a terminated container that will not be
// started again stops its workers, and a pod being deleted stops its
// liveness and startup workers after a last Success.
func TestWorkersStopByThemselves(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	probed := v1.Container{Name: "c", ReadinessProbe: probe(10, 3, 1, 0), LivenessProbe: probe(10, 3, 1, 0)}
	regular := func(policy v1.RestartPolicy) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"},
			Spec: v1.PodSpec{RestartPolicy: policy, Containers: []v1.Container{probed}}}
	}
	statusOf := func(phase v1.PodPhase, state v1.ContainerState) v1.PodStatus {
		return v1.PodStatus{Phase: phase, ContainerStatuses: []v1.ContainerStatus{{Name: "c", ContainerID: "fake://a", State: state}}}
	}
	sidecar := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"}, Spec: v1.PodSpec{
		RestartPolicy:  v1.RestartPolicyNever,
		InitContainers: []v1.Container{{Name: "c", RestartPolicy: &always, ReadinessProbe: probe(10, 3, 1, 0), LivenessProbe: probe(10, 3, 1, 0)}},
		Containers:     []v1.Container{{Name: "main"}},
	}}
	// withRule gives the container its own restart policy and a Restart
	// rule for the codes, if any.
	withRule := func(p *v1.Pod, policy v1.ContainerRestartPolicy, codes ...int32) *v1.Pod {
		c := &p.Spec.Containers[0]
		c.RestartPolicy = &policy
		if len(codes) > 0 {
			c.RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}}
		}
		return p
	}
	// restartAll is a Never pod whose other container restarts all
	// containers on exit code 42; the probed container is Never too.
	restartAll := func() *v1.Pod {
		never := v1.ContainerRestartPolicyNever
		p := regular(v1.RestartPolicyNever)
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "src", RestartPolicy: &never,
			RestartPolicyRules: []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}})
		return p
	}
	withSource := func(s v1.PodStatus, code int32) v1.PodStatus {
		s.ContainerStatuses = append(s.ContainerStatuses, v1.ContainerStatus{Name: "src", ContainerID: "fake://src", State: exited(code)})
		return s
	}
	restarting := statusOf(v1.PodRunning, exited(0))
	restarting.Conditions = []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionTrue}}
	deleted := regular(v1.RestartPolicyAlways)
	deleted.DeletionTimestamp = &metav1.Time{Time: t0}
	deleted.Spec.Containers[0].StartupProbe = probe(10, 3, 1, 0)

	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		status v1.PodStatus
		// workers still running, whether the prober was called, and the
		// updates sent (container, type, result).
		workers int
		probed  bool
		updates []string
	}{
		{name: "Succeeded pod is never probed", pod: regular(v1.RestartPolicyAlways), status: statusOf(v1.PodSucceeded, runningState())},
		{name: "Failed pod is never probed", pod: regular(v1.RestartPolicyAlways), status: statusOf(v1.PodFailed, runningState())},
		{name: "Never: exited container", pod: regular(v1.RestartPolicyNever), status: statusOf(v1.PodRunning, exited(0)),
			updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "Never: exited with an error", pod: regular(v1.RestartPolicyNever), status: statusOf(v1.PodRunning, exited(2)),
			updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "OnFailure: exited with 0", pod: regular(v1.RestartPolicyOnFailure), status: statusOf(v1.PodRunning, exited(0)),
			updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "OnFailure: exited with 1 is restarted", pod: regular(v1.RestartPolicyOnFailure), status: statusOf(v1.PodRunning, exited(1)),
			workers: 2, updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "Always: exited with 0 is restarted", pod: regular(v1.RestartPolicyAlways), status: statusOf(v1.PodRunning, exited(0)),
			workers: 2, updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "Never: waiting container", pod: regular(v1.RestartPolicyNever), status: statusOf(v1.PodPending, v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}),
			workers: 2, updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "Never: exited with the code of a Restart rule is restarted", pod: withRule(regular(v1.RestartPolicyNever), v1.ContainerRestartPolicyNever, 42), status: statusOf(v1.PodRunning, exited(42)),
			workers: 2, updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "Never: exited with another code than the rule's", pod: withRule(regular(v1.RestartPolicyNever), v1.ContainerRestartPolicyNever, 42), status: statusOf(v1.PodRunning, exited(1)),
			updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "Always pod, container Never: exited", pod: withRule(regular(v1.RestartPolicyAlways), v1.ContainerRestartPolicyNever), status: statusOf(v1.PodRunning, exited(0)),
			updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "Never: exited while all containers restart (condition True)", pod: restartAll(), status: restarting,
			workers: 2, updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "Never: exited as another container exited with a code that restarts all", pod: restartAll(), status: withSource(statusOf(v1.PodRunning, exited(0)), 42),
			workers: 2, updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "Never: exited as another container exited with another code", pod: restartAll(), status: withSource(statusOf(v1.PodRunning, exited(0)), 1),
			updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "Never: exited sidecar is restarted", pod: sidecar,
			status:  v1.PodStatus{Phase: v1.PodRunning, InitContainerStatuses: []v1.ContainerStatus{{Name: "c", ContainerID: "fake://a", State: exited(0)}}},
			workers: 2, updates: []string{"c Liveness failure", "c Liveness success", "c Readiness failure"}},
		{name: "deleted pod: readiness goes on, liveness and startup end with success", pod: deleted, status: statusOf(v1.PodRunning, runningState()),
			workers: 1, probed: true, updates: []string{"c Liveness success", "c Readiness failure", "c Readiness success", "c Startup success"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.w.setStatus(tc.status)
			e.m.AddPod(tc.pod)
			var updates []string
			for i := 0; i < 3; i++ {
				updates = append(updates, e.drain()...)
				e.clock.Step(10 * time.Second)
			}
			updates = append(updates, e.drain()...)
			slices.Sort(updates)
			if n := e.m.Workers(); n != tc.workers {
				t.Errorf("%d workers running, want %d", n, tc.workers)
			}
			if called := e.calls() > 0; called != tc.probed {
				t.Errorf("prober called %d times, want called: %v", e.calls(), tc.probed)
			}
			if !slices.Equal(updates, tc.updates) {
				t.Errorf("updates %q, want %q", updates, tc.updates)
			}
			if tc.workers == 0 {
				for _, r := range []probes.Result{e.m.Liveness("fake://a"), e.m.Readiness("fake://a"), e.m.Startup("fake://a")} {
					if r != probes.Unknown {
						t.Errorf("a stopped worker's result is kept: %v", r)
					}
				}
				// A stopped worker is not started again by the next sync.
				e.m.AddPod(tc.pod)
				if n := e.m.Workers(); n != 0 {
					t.Errorf("%d workers after AddPod of a pod whose workers stopped", n)
				}
			}
		})
	}
}

// A worker whose pod turns terminal while it runs stops before its next
// probe.
func TestWorkerStopsWhenThePodTurnsTerminal(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(10, 3, 1, 0)}))
	if u := e.next(10 * time.Second); u.Result != probes.Failure {
		t.Fatalf("first update %+v, want the initial failure", u)
	}
	if u := e.next(10 * time.Second); u.Result != probes.Success {
		t.Fatalf("second update %+v, want success", u)
	}
	e.w.mu.Lock()
	e.w.status.Phase = v1.PodSucceeded
	e.w.mu.Unlock()
	calls := e.calls()
	for i := 0; i < 3; i++ {
		e.clock.Step(10 * time.Second)
		e.settle()
	}
	if n := e.m.Workers(); n != 0 || e.calls() != calls {
		t.Errorf("%d workers and %d probes after the pod succeeded, want none", n, e.calls()-calls)
	}
	if r := e.m.Readiness("fake://a"); r != probes.Unknown {
		t.Errorf("readiness %v kept after the worker stopped", r)
	}
}

// A Prober that returns no verdict counts as failing, as in the kubelet.
func TestUnknownFromTheProberIsFailure(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Unknown)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Liveness: probe(10, 1, 1, 0)}))
	if u := e.next(10 * time.Second); u.Result != probes.Success {
		t.Fatalf("first update %+v, want the initial success", u)
	}
	if u := e.next(10 * time.Second); u.Result != probes.Failure {
		t.Errorf("after an Unknown probe: %+v, want failure", u)
	}
}

// TestProbeErrorIsThrownAway checks the kubelet's rule for a probe that
// could not be run: an Unhealthy event says it errored, and the round
// counts towards no threshold, so two errors between two failures do
// not break the run of failures, nor make one.
func TestProbeErrorIsThrownAway(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.mu.Lock()
	e.w.errs = 3
	e.w.mu.Unlock()
	e.w.script(probes.Failure)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Liveness: probe(10, 2, 1, 0)}))
	if u := e.next(10 * time.Second); u.Result != probes.Success {
		t.Fatalf("first update %+v, want the initial success", u)
	}
	// Three errored rounds, then two failures: the failure threshold (2)
	// is reached on the fifth probe, not the second.
	for i := 0; i < 3; i++ {
		e.clock.Step(10 * time.Second)
		if got := e.drain(); len(got) != 0 {
			t.Fatalf("probe %d: updates %v, want none", i+2, got)
		}
	}
	if n := e.calls(); n != 4 {
		t.Fatalf("%d probes run, want 4", n)
	}
	if u := e.next(10 * time.Second); u.Result != probes.Failure {
		t.Errorf("after two failures: %+v, want failure", u)
	}
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	var errored int
	for _, ev := range e.w.events {
		if strings.Contains(ev, "Liveness probe errored and resulted in unknown state: scripted prober error") {
			errored++
		}
	}
	if errored != 3 {
		t.Errorf("events %q: want 3 errored probes", e.w.events)
	}
}

// TestStopLivenessAndStartupKeepsReadiness checks the kubelet's order
// when a pod is killed: liveness and startup stop before the kill (no
// restart for a liveness failure during the grace period), readiness
// keeps probing, so the pod can still turn NotReady, and AddPod does not
// start the stopped workers again.
func TestStopLivenessAndStartupKeepsReadiness(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Success)
	p := pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(10, 1, 1, 0), probes.Liveness: probe(10, 1, 1, 0)})
	e.m.AddPod(p)
	for i := 0; e.m.Readiness("fake://a") != probes.Success || e.m.Liveness("fake://a") != probes.Success; i++ {
		if i == 10 {
			t.Fatalf("readiness %v, liveness %v after 10 updates, want both Success", e.m.Readiness("fake://a"), e.m.Liveness("fake://a"))
		}
		e.next(10 * time.Second)
	}
	e.m.StopLivenessAndStartup(p.UID)
	e.m.AddPod(p)
	if n := e.m.Workers(); n != 1 {
		t.Fatalf("%d workers after StopLivenessAndStartup and AddPod, want 1 (readiness)", n)
	}
	if r := e.m.Liveness("fake://a"); r != probes.Unknown {
		t.Errorf("liveness result %v kept after its worker stopped, want Unknown", r)
	}
	e.drain()
	e.w.script(probes.Failure)
	u := e.next(10 * time.Second)
	if u.Type != probes.Readiness || u.Result != probes.Failure {
		t.Fatalf("update %+v, want readiness Failure while the pod terminates", u)
	}
	if got := e.drain(); len(got) != 0 {
		t.Errorf("updates %v after readiness failed, want none (liveness is stopped)", got)
	}
	e.m.RemovePod(p.UID)
	if n := e.m.Workers(); n != 0 {
		t.Errorf("%d workers after RemovePod", n)
	}
}
