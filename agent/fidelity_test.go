package agent_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// The whole agent on fakecri, checked against the statuses the kubelet
// reports: pods come from a channel source, as from an API server, and
// every status the agent pushes is recorded.

// history records every status pushed for each pod, by pod name.
type history struct {
	mu   sync.Mutex
	pods map[string][]v1.PodStatus
}

func (h *history) UpdatePodStatus(_ context.Context, pod *v1.Pod, s v1.PodStatus) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pods == nil {
		h.pods = map[string][]v1.PodStatus{}
	}
	h.pods[pod.Name] = append(h.pods[pod.Name], *s.DeepCopy())
	return nil
}

// last is the newest status pushed for the pod, if any.
func (h *history) last(name string) (v1.PodStatus, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.pods[name]
	if len(l) == 0 {
		return v1.PodStatus{}, false
	}
	return l[len(l)-1], true
}

// all is every status pushed for the pod, oldest first.
func (h *history) all(name string) []v1.PodStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]v1.PodStatus(nil), h.pods[name]...)
}

func (h *history) describe(name string) string {
	var b strings.Builder
	for i, s := range h.all(name) {
		fmt.Fprintf(&b, "%d: %s reason=%q", i, s.Phase, s.Reason)
		for _, c := range s.InitContainerStatuses {
			fmt.Fprintf(&b, " init %s=%s", c.Name, describeState(c))
		}
		for _, c := range s.ContainerStatuses {
			fmt.Fprintf(&b, " %s=%s", c.Name, describeState(c))
		}
		for _, c := range s.Conditions {
			fmt.Fprintf(&b, " %s=%s(%s %q)", c.Type, c.Status, c.Reason, c.Message)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func describeState(c v1.ContainerStatus) string {
	switch {
	case c.State.Running != nil:
		return fmt.Sprintf("running(ready=%v)", c.Ready)
	case c.State.Terminated != nil:
		return fmt.Sprintf("terminated(%d %s %q)", c.State.Terminated.ExitCode, c.State.Terminated.Reason, c.State.Terminated.Message)
	case c.State.Waiting != nil:
		return fmt.Sprintf("waiting(%s)", c.State.Waiting.Reason)
	}
	return "none"
}

// killRecorder is the CRI runtime, recording the running pods KillPod is
// given for pods with a spec.
type killRecorder struct {
	*cri.Runtime
	mu      sync.Mutex
	withPod int // KillPod calls with a spec
	blind   int // of those, calls without the running pod
}

func (k *killRecorder) KillPod(ctx context.Context, pod *v1.Pod, running *runtime.Pod, grace *int64) error {
	if pod != nil {
		k.mu.Lock()
		k.withPod++
		if running == nil {
			k.blind++
		}
		k.mu.Unlock()
	}
	return k.Runtime.KillPod(ctx, pod, running, grace)
}

type fidelity struct {
	t       *testing.T
	fake    *fakecri.Runtime
	api     *podsource.Channel
	history *history
	kills   *killRecorder
	agent   *agent.Agent // set by apiAgentOn
}

// startFidelity runs an agent on fakecri with a channel source named
// "api"; with recordKills the runtime records its KillPod calls.
func startFidelity(t *testing.T, recordKills bool) *fidelity {
	t.Helper()
	fake := newFake(t)
	dir := t.TempDir()
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	cfg := agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-",
			CrashLoopBackOff: cri.BackOff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}},
	}
	if recordKills {
		c := cfg.CRI
		c.RuntimeService, c.ImageService, c.NodeName = fake, fake, "node"
		rt, err := cri.New(c)
		if err != nil {
			t.Fatal(err)
		}
		f.kills = &killRecorder{Runtime: rt}
		cfg.Runtime = f.kills
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	f.send(podsource.SET)
	return f
}

func (f *fidelity) send(op podsource.Op, pods ...*v1.Pod) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.api.Send(ctx, podsource.Update{Op: op, Pods: pods}); err != nil {
		f.t.Fatal(err)
	}
}

// waitFor waits until the newest status of the pod satisfies cond.
func (f *fidelity) waitFor(name, what string, cond func(v1.PodStatus) bool) v1.PodStatus {
	f.t.Helper()
	var got v1.PodStatus
	eventuallyShowing(f.t, name+" "+what, func() bool {
		s, ok := f.history.last(name)
		got = s
		return ok && cond(s)
	}, func() string { return f.history.describe(name) })
	return got
}

// delete marks the pod deleted, as the API server does.
func (f *fidelity) delete(p *v1.Pod) {
	f.t.Helper()
	d := p.DeepCopy()
	grace := int64(5)
	d.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	d.DeletionGracePeriodSeconds = &grace
	f.send(podsource.DELETE, d)
}

// apiPod is a pod as an API server hands it out (defaults applied), with
// one container per name, each scripted by env (name=value pairs, the
// same for all).
func apiPod(name string, policy v1.RestartPolicy, containers []string, env ...string) *v1.Pod {
	grace := int64(5)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"),
			Annotations: map[string]string{podsource.AnnotationConfigSource: podsource.SourceAPI}},
		Spec: v1.PodSpec{NodeName: "node", RestartPolicy: policy, TerminationGracePeriodSeconds: &grace, DNSPolicy: v1.DNSDefault},
	}
	for _, n := range containers {
		p.Spec.Containers = append(p.Spec.Containers, container(n, env...))
	}
	return p
}

func container(name string, env ...string) v1.Container {
	c := v1.Container{Name: name, Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent,
		TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile}
	for i := 0; i+1 < len(env); i += 2 {
		c.Env = append(c.Env, v1.EnvVar{Name: env[i], Value: env[i+1]})
	}
	return c
}

func condOf(s v1.PodStatus, t v1.PodConditionType) v1.PodCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}

func terminalPhase(s v1.PodStatus) bool {
	return s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed
}

// A deleted pod ends in the phase its containers' exits give, whatever
// its restart policy, and KillPod is handed the pod the worker observed
// instead of making the runtime list every pod of the node.
func TestDeletedPodEndsInATerminalPhase(t *testing.T) {
	f := startFidelity(t, true)
	quits := apiPod("quits", v1.RestartPolicyAlways, []string{"main"}, fakecri.EnvTermExitCode, "0")
	killed := apiPod("killed", v1.RestartPolicyAlways, []string{"main"})
	f.send(podsource.ADD, quits, killed)
	for _, p := range []*v1.Pod{quits, killed} {
		f.waitFor(p.Name, "runs", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
		f.delete(p)
	}
	for _, tc := range []struct {
		name  string
		phase v1.PodPhase
		exit  int32
	}{{"quits", v1.PodSucceeded, 0}, {"killed", v1.PodFailed, 143}} {
		s := f.waitFor(tc.name, "ends", terminalPhase)
		if s.Phase != tc.phase {
			t.Errorf("%s ended %s, want %s\n%s", tc.name, s.Phase, tc.phase, f.history.describe(tc.name))
		}
		if c := s.ContainerStatuses[0]; c.State.Terminated == nil || c.State.Terminated.ExitCode != tc.exit {
			t.Errorf("%s: container %s, want terminated with %d", tc.name, describeState(c), tc.exit)
		}
	}
	f.kills.mu.Lock()
	defer f.kills.mu.Unlock()
	if f.kills.withPod == 0 || f.kills.blind != 0 {
		t.Errorf("%d of %d kills without the observed pod, want none", f.kills.blind, f.kills.withPod)
	}
}

// A static pod keeps the phase its restart policy gives when it is
// terminated, as with the kubelet, while its container is reported
// terminated.
func TestDeletedStaticPodKeepsItsPhase(t *testing.T) {
	f := startFidelity(t, false)
	p := apiPod("static", v1.RestartPolicyAlways, []string{"main"})
	p.Annotations[podsource.AnnotationConfigSource] = podsource.SourceFile
	f.send(podsource.ADD, p)
	f.waitFor(p.Name, "runs", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	f.delete(p)
	s := f.waitFor(p.Name, "has its container stopped", func(s v1.PodStatus) bool {
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Terminated != nil
	})
	if s.Phase != v1.PodRunning {
		t.Errorf("static pod ended %s, want Running\n%s", s.Phase, f.history.describe(p.Name))
	}
}

// A pod deleted before its container could start ends Failed, its
// container terminated with an unknown end, as the kubelet's final
// status has it.
func TestPodDeletedWhileItsImageFailsEndsFailed(t *testing.T) {
	f := startFidelity(t, false)
	if err := f.fake.SetPull("example.com/missing:1", fakecri.PullBehavior{Err: errors.New("not found")}); err != nil {
		t.Fatal(err)
	}
	p := apiPod("stuck", v1.RestartPolicyAlways, []string{"main"})
	p.Spec.Containers[0].Image = "example.com/missing:1"
	f.send(podsource.ADD, p)
	f.waitFor(p.Name, "fails to pull", func(s v1.PodStatus) bool {
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Waiting != nil && s.ContainerStatuses[0].State.Waiting.Reason == "ErrImagePull"
	})
	f.delete(p)
	s := f.waitFor(p.Name, "ends", terminalPhase)
	want := `terminated(137 ContainerStatusUnknown "The container could not be located when the pod was terminated")`
	if s.Phase != v1.PodFailed || describeState(s.ContainerStatuses[0]) != want {
		t.Errorf("%s with %s, want Failed with %s\n%s", s.Phase, describeState(s.ContainerStatuses[0]), want, f.history.describe(p.Name))
	}
}

// Every condition carries the kubelet's reason and message: a pod whose
// readiness probe fails, one that succeeded and one that failed.
func TestConditionsCarryTheKubeletsReasons(t *testing.T) {
	f := startFidelity(t, false)
	unready := apiPod("unready", v1.RestartPolicyAlways, []string{"main", "side"}, fakecri.EnvExecExitCode, "1")
	for i := range unready.Spec.Containers {
		unready.Spec.Containers[i].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	}
	done := apiPod("done", v1.RestartPolicyNever, []string{"main"}, fakecri.EnvExitCode, "0")
	failed := apiPod("failed", v1.RestartPolicyNever, []string{"main"}, fakecri.EnvExitCode, "3")
	f.send(podsource.ADD, unready, done, failed)

	type want struct {
		status          v1.ConditionStatus
		reason, message string
	}
	check := func(name string, s v1.PodStatus, wants map[v1.PodConditionType]want) {
		t.Helper()
		for typ, w := range wants {
			got := condOf(s, typ)
			if got.Status != w.status || got.Reason != w.reason || got.Message != w.message {
				t.Errorf("%s: %s = %s %q %q, want %s %q %q\n%s", name, typ, got.Status, got.Reason, got.Message, w.status, w.reason, w.message, f.history.describe(name))
			}
		}
	}
	T, F := v1.ConditionTrue, v1.ConditionFalse
	s := f.waitFor("unready", "runs", func(s v1.PodStatus) bool {
		return s.Phase == v1.PodRunning && len(s.ContainerStatuses) == 2 && s.ContainerStatuses[0].State.Running != nil && s.ContainerStatuses[1].State.Running != nil
	})
	check("unready", s, map[v1.PodConditionType]want{
		v1.PodReadyToStartContainers: {T, "", ""},
		v1.PodInitialized:            {T, "", ""},
		v1.ContainersReady:           {F, "ContainersNotReady", "containers with unready status: [main side]"},
		v1.PodReady:                  {F, "ContainersNotReady", "containers with unready status: [main side]"},
		v1.PodScheduled:              {T, "", ""},
	})
	for _, tc := range []struct {
		name, reason string
		phase        v1.PodPhase
		initialized  want
	}{
		{"done", "PodCompleted", v1.PodSucceeded, want{T, "PodCompleted", ""}},
		{"failed", "PodFailed", v1.PodFailed, want{T, "", ""}},
	} {
		s := f.waitFor(tc.name, "ends and its sandbox is stopped", func(s v1.PodStatus) bool {
			return terminalPhase(s) && condOf(s, v1.PodReadyToStartContainers).Status == v1.ConditionFalse
		})
		if s.Phase != tc.phase {
			t.Errorf("%s ended %s, want %s", tc.name, s.Phase, tc.phase)
		}
		sandbox := condOf(s, v1.PodReadyToStartContainers)
		if sandbox.Reason != "PodSandboxNotReady" || (sandbox.Message != "pod sandbox is not ready" && sandbox.Message != "no pod sandbox exists") {
			t.Errorf("%s: PodReadyToStartContainers %s %q %q, want PodSandboxNotReady", tc.name, sandbox.Status, sandbox.Reason, sandbox.Message)
		}
		check(tc.name, s, map[v1.PodConditionType]want{
			v1.PodInitialized:  tc.initialized,
			v1.ContainersReady: {F, tc.reason, ""},
			v1.PodReady:        {F, tc.reason, ""},
		})
	}
}

// A Never pod with a sidecar stays Running after its main container
// exits, until the sidecar is stopped; then it has Succeeded.
func TestSidecarKeepsAFinishedPodRunningUntilItStops(t *testing.T) {
	f := startFidelity(t, false)
	always := v1.ContainerRestartPolicyAlways
	p := apiPod("job", v1.RestartPolicyNever, []string{"main"}, fakecri.EnvExitAfter, "300ms")
	proxy := container("proxy", fakecri.EnvStopDelay, "300ms")
	proxy.RestartPolicy = &always
	p.Spec.InitContainers = []v1.Container{proxy}
	f.send(podsource.ADD, p)

	sidecarRuns := func(s v1.PodStatus) bool {
		return len(s.InitContainerStatuses) == 1 && s.InitContainerStatuses[0].State.Running != nil
	}
	mainDone := func(s v1.PodStatus) bool {
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Terminated != nil
	}
	s := f.waitFor(p.Name, "ends", terminalPhase)
	if s.Phase != v1.PodSucceeded || sidecarRuns(s) {
		t.Errorf("ended %s, sidecar running %v; want Succeeded with the sidecar stopped\n%s", s.Phase, sidecarRuns(s), f.history.describe(p.Name))
	}
	sawRunning := false
	for _, s := range f.history.all(p.Name) {
		if mainDone(s) && sidecarRuns(s) {
			if s.Phase != v1.PodRunning {
				t.Errorf("main exited, sidecar running: phase %s, want Running\n%s", s.Phase, f.history.describe(p.Name))
			}
			sawRunning = true
		}
	}
	if !sawRunning {
		t.Errorf("no status with the main container done and the sidecar running\n%s", f.history.describe(p.Name))
	}
}
