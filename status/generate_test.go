package status_test

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// sidecarPod is a pod with one sidecar "proxy", behind a startup probe,
// and the given regular containers.
func sidecarPod(policy v1.RestartPolicy, containers ...string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	p := pod(policy, []string{"proxy"}, containers...)
	p.Spec.InitContainers[0].RestartPolicy = &always
	p.Spec.InitContainers[0].StartupProbe = &v1.Probe{}
	return p
}

func TestPhaseWithSidecars(t *testing.T) {
	always, never := v1.RestartPolicyAlways, v1.RestartPolicyNever
	proxy := c("proxy", running, 0, 0)
	started := map[string]bool{proxy.ID.String(): true}
	crashed := c("proxy", exited, 1, 2)
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		obs     *runtime.PodStatus
		started map[string]bool
		waiting map[string]status.Reason
		want    v1.PodPhase
	}{
		{"sidecar not started, app not created", sidecarPod(always, "app"), observed(proxy), nil, nil, v1.PodPending},
		{"sidecar never ran, app not created", sidecarPod(always, "app"), observed(), nil, nil, v1.PodPending},
		{"app running, sidecar restarted and not started yet", sidecarPod(always, "app"), observed(c("app", running, 0, 0), c("proxy", running, 0, 1)), nil, nil, v1.PodRunning},
		{"app running, sidecar crash looping", sidecarPod(always, "app"), observed(c("app", running, 0, 0), crashed), nil,
			map[string]status.Reason{"proxy": {Reason: "CrashLoopBackOff"}}, v1.PodRunning},
		{"app running, sidecar stopped", sidecarPod(always, "app"), observed(c("app", running, 0, 0), crashed), nil, nil, v1.PodRunning},
		{"Never, app succeeded, sidecar still running", sidecarPod(never, "app"), observed(c("app", exited, 0, 0), proxy), started, nil, v1.PodRunning},
		{"Never, app failed, sidecar still running", sidecarPod(never, "app"), observed(c("app", exited, 1, 0), proxy), started, nil, v1.PodRunning},
		{"Never, app succeeded, sidecar stopped", sidecarPod(never, "app"), observed(c("app", exited, 0, 0), c("proxy", exited, 137, 0)), started, nil, v1.PodSucceeded},
		{"Never, app failed, sidecar stopped", sidecarPod(never, "app"), observed(c("app", exited, 1, 0), c("proxy", exited, 0, 0)), started, nil, v1.PodFailed},
		{"sidecar stopped, app not created", sidecarPod(always, "app"), observed(crashed), nil, nil, v1.PodPending},
		// Started in an older sandbox: the pod initializes again.
		{"new sandbox, old app, sidecar not started", sidecarPod(always, "app"), func() *runtime.PodStatus {
			o := observed(c("proxy", running, 0, 1), c("app", exited, 137, 0))
			o.ContainerStatuses[0].SandboxID = "sb"
			o.ContainerStatuses[1].SandboxID = "old"
			return o
		}(), nil, nil, v1.PodPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.Generate(status.Input{Pod: tc.pod, Runtime: tc.obs, Started: tc.started, Waiting: tc.waiting, Now: now})
			if s.Phase != tc.want {
				t.Errorf("phase %s, want %s", s.Phase, tc.want)
			}
		})
	}
}

func static(p *v1.Pod) *v1.Pod {
	p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	return p
}

// gone is a runtime observation of a pod whose sandbox was removed.
func gone(containers ...*runtime.ContainerStatus) *runtime.PodStatus {
	return &runtime.PodStatus{ContainerStatuses: containers}
}

func TestPhaseOfATerminatedPod(t *testing.T) {
	always, onFailure, never := v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		obs   *runtime.PodStatus
		stage status.Stage
		want  v1.PodPhase
	}{
		{"syncing, Always, killed", pod(always, nil, "a"), gone(c("a", exited, 137, 0)), status.Syncing, v1.PodRunning},
		{"stopped, Always, killed", pod(always, nil, "a"), gone(c("a", exited, 137, 0)), status.Stopped, v1.PodFailed},
		{"stopped, Always, exited 0 on SIGTERM", pod(always, nil, "a", "b"), gone(c("a", exited, 0, 0), c("b", exited, 0, 0)), status.Stopped, v1.PodSucceeded},
		{"stopped, OnFailure, one failed", pod(onFailure, nil, "a", "b"), gone(c("a", exited, 0, 0), c("b", exited, 1, 0)), status.Stopped, v1.PodFailed},
		{"stopped, Never, succeeded", pod(never, nil, "a"), gone(c("a", exited, 0, 0)), status.Stopped, v1.PodSucceeded},
		{"stopped, static, Always, killed", static(pod(always, nil, "a")), gone(c("a", exited, 137, 0)), status.Stopped, v1.PodRunning},
		{"stopped, static, Never, killed", static(pod(never, nil, "a")), gone(c("a", exited, 137, 0)), status.Stopped, v1.PodFailed},
		{"stopped, never created", pod(always, nil, "a"), gone(), status.Stopped, v1.PodPending},
		{"terminated, never created", pod(always, nil, "a"), gone(), status.Terminated, v1.PodFailed},
		{"terminated, static, never created", static(pod(always, nil, "a")), gone(), status.Terminated, v1.PodPending},
		{"terminated, static, Always, killed", static(pod(always, nil, "a")), gone(c("a", exited, 137, 0)), status.Terminated, v1.PodRunning},
		{"terminated, Always, exited 0", pod(always, nil, "a"), gone(c("a", exited, 0, 0)), status.Terminated, v1.PodSucceeded},
		{"terminated, init container killed", pod(always, []string{"i"}, "a"), gone(c("i", exited, 137, 0)), status.Terminated, v1.PodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.Generate(status.Input{Pod: tc.pod, Runtime: tc.obs, Stage: tc.stage, Now: now})
			if s.Phase != tc.want {
				t.Errorf("phase %s, want %s", s.Phase, tc.want)
			}
		})
	}
}

func TestTerminalPhaseFromTheAPIIsKept(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, nil, "a")
	p.Status.Phase = v1.PodFailed
	s := status.Generate(status.Input{Pod: p, Runtime: observed(c("a", running, 0, 0)), Now: now})
	if s.Phase != v1.PodFailed {
		t.Errorf("phase %s with Failed in the API, want Failed", s.Phase)
	}
}

func terminated(st v1.ContainerState) string {
	if t := st.Terminated; t != nil {
		return fmt.Sprintf("terminated %d %s %q", t.ExitCode, t.Reason, t.Message)
	}
	if w := st.Waiting; w != nil {
		return fmt.Sprintf("waiting %s", w.Reason)
	}
	if st.Running != nil {
		return "running"
	}
	return "none"
}

func TestContainersLostByTheRuntime(t *testing.T) {
	const (
		vanished    = `terminated 137 ContainerStatusUnknown "The container could not be located when the pod was deleted.  The container used to be Running"`
		notLocated  = `terminated 137 ContainerStatusUnknown "The container could not be located when the pod was terminated"`
		waitingNone = "waiting "
	)
	always := v1.RestartPolicyAlways
	deleted := pod(always, nil, "a")
	deleted.DeletionTimestamp = &metav1.Time{Time: now}
	unknown := c("a", runtime.ContainerStateUnknown, 0, 2)
	for _, tc := range []struct {
		name          string
		pod           *v1.Pod
		prev          *runtime.PodStatus // what the previous status was made from
		obs           *runtime.PodStatus
		stage         status.Stage
		state, last   string
		restarts      int32
		phase         v1.PodPhase
		prevIsMissing bool
	}{
		{"vanished after running", pod(always, nil, "a"), observed(c("a", running, 0, 2)), gone(), status.Syncing,
			"waiting ContainerCreating", vanished, 3, v1.PodRunning, false},
		{"vanished after running, pod deleted", deleted, observed(c("a", running, 0, 2)), gone(), status.Syncing,
			"waiting ContainerCreating", vanished, 2, v1.PodRunning, false},
		{"vanished after running, stopped", deleted, observed(c("a", running, 0, 2)), gone(), status.Stopped,
			"waiting ContainerCreating", vanished, 2, v1.PodFailed, false},
		{"vanished after running, final status", deleted, observed(c("a", running, 0, 2)), gone(), status.Terminated,
			notLocated, vanished, 2, v1.PodFailed, false},
		{"unknown state after running", pod(always, nil, "a"), observed(c("a", running, 0, 2)), observed(unknown), status.Syncing,
			notLocated, "none", 3, v1.PodRunning, false},
		{"unknown state without a record", pod(always, nil, "a"), nil, observed(unknown), status.Syncing,
			waitingNone, "none", 2, v1.PodPending, true},
		{"finished and removed, Never", pod(v1.RestartPolicyNever, nil, "a"), observed(c("a", exited, 0, 0)), gone(), status.Syncing,
			`terminated 0  ""`, "none", 0, v1.PodSucceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := status.Input{Pod: tc.pod, Runtime: tc.obs, Stage: tc.stage, Now: now}
			if !tc.prevIsMissing {
				prev := status.Generate(status.Input{Pod: tc.pod, Runtime: tc.prev, Now: now})
				in.Previous = &prev
			}
			s := status.Generate(in)
			cs := s.ContainerStatuses[0]
			if got := terminated(cs.State); got != tc.state {
				t.Errorf("state %s, want %s", got, tc.state)
			}
			if got := terminated(cs.LastTerminationState); got != tc.last {
				t.Errorf("last state %s, want %s", got, tc.last)
			}
			if cs.RestartCount != tc.restarts {
				t.Errorf("restart count %d, want %d", cs.RestartCount, tc.restarts)
			}
			if s.Phase != tc.phase {
				t.Errorf("phase %s, want %s", s.Phase, tc.phase)
			}
		})
	}
}

func TestFinalStatusOfInitContainers(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, []string{"a", "b", "c"})
	p.Spec.Containers = []v1.Container{{Name: "app", Image: "img"}}
	for _, tc := range []struct {
		name string
		obs  *runtime.PodStatus
		want []string
	}{
		{"second running", gone(c("b", running, 0, 0), c("a", exited, 0, 0)),
			[]string{`terminated 0  ""`, `terminated 137 ContainerStatusUnknown "The container could not be located when the pod was terminated"`, "waiting PodInitializing"}},
		{"none started", gone(), []string{`terminated 137 ContainerStatusUnknown "The container could not be located when the pod was terminated"`, "waiting PodInitializing", "waiting PodInitializing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.Generate(status.Input{Pod: p, Runtime: tc.obs, Stage: status.Terminated, Now: now})
			for i, want := range tc.want {
				if got := terminated(s.InitContainerStatuses[i].State); got != want {
					t.Errorf("%s: %s, want %s", s.InitContainerStatuses[i].Name, got, want)
				}
			}
			if got := terminated(s.ContainerStatuses[0].State); got != "waiting PodInitializing" {
				t.Errorf("app before initialization: %s, want still waiting", got)
			}
		})
	}
}

func TestInitContainerRemovedFromAnInitializedPod(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, []string{"i"}, "app")
	s := status.Generate(status.Input{Pod: p, Runtime: observed(c("app", running, 0, 0)), Now: now})
	want := `terminated 0 Completed "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally"`
	if got := terminated(s.InitContainerStatuses[0].State); got != want {
		t.Errorf("init container: %s, want %s", got, want)
	}
	if s.Phase != v1.PodRunning {
		t.Errorf("phase %s, want Running", s.Phase)
	}
}

func TestReasonAndMessageFollowThePhase(t *testing.T) {
	p := pod(v1.RestartPolicyNever, nil, "a")
	runningObs := observed(c("a", running, 0, 0))
	for _, tc := range []struct {
		name            string
		api, prev       v1.PodStatus
		obs             *runtime.PodStatus
		reason, message string
	}{
		{"same phase: kept", v1.PodStatus{}, v1.PodStatus{Phase: v1.PodRunning, Reason: "Shutdown", Message: "node is shutting down"}, runningObs,
			"Shutdown", "node is shutting down"},
		{"same phase, none kept: the API's", v1.PodStatus{Phase: v1.PodRunning, Reason: "Preempting", Message: "by the API"}, v1.PodStatus{Phase: v1.PodRunning}, runningObs,
			"Preempting", "by the API"},
		{"phase changed: dropped", v1.PodStatus{Reason: "Preempting"}, v1.PodStatus{Phase: v1.PodRunning, Reason: "Shutdown", Message: "node is shutting down"},
			observed(c("a", exited, 0, 0)), "", ""},
		{"Pending to Running: dropped", v1.PodStatus{}, v1.PodStatus{Phase: v1.PodPending, Reason: "Waiting", Message: "for the sandbox"}, runningObs, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := p.DeepCopy()
			p.Status = tc.api
			s := status.Generate(status.Input{Pod: p, Runtime: tc.obs, Previous: &tc.prev, Now: now})
			if s.Reason != tc.reason || s.Message != tc.message {
				t.Errorf("reason %q message %q, want %q %q", s.Reason, s.Message, tc.reason, tc.message)
			}
		})
	}
}

type wantCond struct {
	status          v1.ConditionStatus
	reason, message string
}

func checkConds(t *testing.T, s v1.PodStatus, want map[v1.PodConditionType]wantCond) {
	t.Helper()
	for typ, w := range want {
		got := condition(s, typ)
		if got.Type == "" {
			t.Errorf("no %s condition", typ)
			continue
		}
		if got.Status != w.status || got.Reason != w.reason || got.Message != w.message {
			t.Errorf("%s = %s %q %q, want %s %q %q", typ, got.Status, got.Reason, got.Message, w.status, w.reason, w.message)
		}
	}
}

func TestConditionReasonsAndMessages(t *testing.T) {
	T, F := v1.ConditionTrue, v1.ConditionFalse
	probedPod := pod(v1.RestartPolicyAlways, nil, "a", "b", "c")
	probedPod.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
	probedPod.Spec.Containers[1].ReadinessProbe = &v1.Probe{}
	gated := pod(v1.RestartPolicyAlways, nil, "a")
	gated.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}}
	gated.Status.Conditions = []v1.PodCondition{{Type: "example.com/dns", Status: v1.ConditionFalse}}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		obs  *runtime.PodStatus
		want map[v1.PodConditionType]wantCond
	}{
		{"unready containers", probedPod, observed(c("a", running, 0, 0), c("b", running, 0, 0), c("c", running, 0, 0)), map[v1.PodConditionType]wantCond{
			v1.ContainersReady: {F, "ContainersNotReady", "containers with unready status: [a b]"},
			v1.PodReady:        {F, "ContainersNotReady", "containers with unready status: [a b]"},
			v1.PodInitialized:  {T, "", ""},
			v1.PodScheduled:    {T, "", ""},
		}},
		{"init container running", pod(v1.RestartPolicyAlways, []string{"i", "j"}, "a"), observed(c("i", running, 0, 0)), map[v1.PodConditionType]wantCond{
			v1.PodInitialized:  {F, "ContainersNotInitialized", "containers with incomplete status: [i j]"},
			v1.ContainersReady: {F, "ContainersNotReady", "containers with unready status: [a]"},
		}},
		{"succeeded", pod(v1.RestartPolicyNever, []string{"i"}, "a"), gone(c("a", exited, 0, 0), c("i", exited, 0, 0)), map[v1.PodConditionType]wantCond{
			v1.PodInitialized:            {T, "PodCompleted", ""},
			v1.ContainersReady:           {F, "PodCompleted", ""},
			v1.PodReady:                  {F, "PodCompleted", ""},
			v1.PodReadyToStartContainers: {F, "PodSandboxNotReady", "no pod sandbox exists"},
		}},
		{"failed", pod(v1.RestartPolicyNever, nil, "a", "b"), observed(c("a", exited, 0, 0), c("b", exited, 1, 0)), map[v1.PodConditionType]wantCond{
			v1.PodInitialized:  {T, "", ""},
			v1.ContainersReady: {F, "PodFailed", ""},
			v1.PodReady:        {F, "PodFailed", ""},
		}},
		{"readiness gates", gated, observed(c("a", running, 0, 0)), map[v1.PodConditionType]wantCond{
			v1.ContainersReady: {T, "", ""},
			v1.PodReady: {F, "ReadinessGatesNotReady", `corresponding condition of pod readiness gate "example.com/lb" does not exist., ` +
				`the status of pod readiness gate "example.com/dns" is not "True", but False`},
		}},
		{"all ready", pod(v1.RestartPolicyAlways, nil, "a"), observed(c("a", running, 0, 0)), map[v1.PodConditionType]wantCond{
			v1.PodReadyToStartContainers: {T, "", ""},
			v1.ContainersReady:           {T, "", ""},
			v1.PodReady:                  {T, "", ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkConds(t, status.Generate(status.Input{Pod: tc.pod, Runtime: tc.obs, Now: now}), tc.want)
		})
	}
}

func TestSidecarsInReadinessAndInitialization(t *testing.T) {
	T, F := v1.ConditionTrue, v1.ConditionFalse
	probed := sidecarPod(v1.RestartPolicyAlways, "app")
	probed.Spec.InitContainers[0].ReadinessProbe = &v1.Probe{}
	proxy := c("proxy", running, 0, 0)
	started := map[string]bool{proxy.ID.String(): true}
	initializedBefore := &v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionTrue}}}
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		obs     *runtime.PodStatus
		started map[string]bool
		ready   map[string]bool
		waiting map[string]status.Reason
		prev    *v1.PodStatus
		want    map[v1.PodConditionType]wantCond
	}{
		{"sidecar not ready", probed, observed(c("app", running, 0, 0), proxy), started, nil, nil, nil, map[v1.PodConditionType]wantCond{
			v1.ContainersReady: {F, "ContainersNotReady", "containers with unready status: [proxy]"},
			v1.PodReady:        {F, "ContainersNotReady", "containers with unready status: [proxy]"},
		}},
		{"sidecar and app not ready", probed, observed(proxy), started, nil, nil, nil, map[v1.PodConditionType]wantCond{
			v1.ContainersReady: {F, "ContainersNotReady", "containers with unready status: [proxy app]"},
		}},
		{"sidecar ready", probed, observed(c("app", running, 0, 0), proxy), started, map[string]bool{proxy.ID.String(): true}, nil, nil, map[v1.PodConditionType]wantCond{
			v1.ContainersReady: {T, "", ""},
			v1.PodReady:        {T, "", ""},
		}},
		{"sidecar not started before the app", sidecarPod(v1.RestartPolicyAlways, "app"), observed(proxy), nil, nil, nil, nil, map[v1.PodConditionType]wantCond{
			v1.PodInitialized: {F, "ContainersNotInitialized", "containers with incomplete status: [proxy]"},
		}},
		{"sidecar crash looping after the app started", sidecarPod(v1.RestartPolicyAlways, "app"), observed(c("app", running, 0, 0), c("proxy", exited, 1, 3)), nil, nil,
			map[string]status.Reason{"proxy": {Reason: "CrashLoopBackOff"}}, nil, map[v1.PodConditionType]wantCond{
				v1.PodInitialized: {T, "", ""},
			}},
		{"sidecar restarted, not started yet", sidecarPod(v1.RestartPolicyAlways, "app"), observed(c("app", running, 0, 0), c("proxy", running, 0, 1)), nil, nil, nil, nil,
			map[v1.PodConditionType]wantCond{
				v1.PodInitialized: {T, "", ""},
			}},
		{"initializing again after it had initialized", pod(v1.RestartPolicyAlways, []string{"i"}, "app"), observed(c("i", running, 0, 0)), nil, nil, nil, initializedBefore,
			map[v1.PodConditionType]wantCond{
				v1.PodInitialized: {T, "", ""},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.Generate(status.Input{Pod: tc.pod, Runtime: tc.obs, Started: tc.started, Ready: tc.ready, Waiting: tc.waiting, Previous: tc.prev, Now: now})
			checkConds(t, s, tc.want)
		})
	}
}

func TestReadyToStartContainersFollowsTheSandboxRule(t *testing.T) {
	hostNet := pod(v1.RestartPolicyAlways, nil, "a")
	hostNet.Spec.HostNetwork = true
	sb := func(id string, state runtime.SandboxState, mode runtime.NamespaceMode, ips ...string) *runtime.SandboxStatus {
		return &runtime.SandboxStatus{ID: id, State: state, NetworkMode: mode, IPs: ips}
	}
	ready, notReady := runtime.SandboxStateReady, runtime.SandboxStateNotReady
	podNS, nodeNS := runtime.NamespaceModePod, runtime.NamespaceModeNode
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		sandboxes []*runtime.SandboxStatus
		want      wantCond
	}{
		{"one ready sandbox", pod(v1.RestartPolicyAlways, nil, "a"), []*runtime.SandboxStatus{sb("s1", ready, podNS, "127.88.0.1")},
			wantCond{v1.ConditionTrue, "", ""}},
		{"none", pod(v1.RestartPolicyAlways, nil, "a"), nil,
			wantCond{v1.ConditionFalse, "PodSandboxNotReady", "no pod sandbox exists"}},
		{"two ready sandboxes", pod(v1.RestartPolicyAlways, nil, "a"), []*runtime.SandboxStatus{sb("s2", ready, podNS, "127.88.0.2"), sb("s1", ready, podNS, "127.88.0.1")},
			wantCond{v1.ConditionFalse, "PodSandboxNotReady", "multiple pod sandboxes are ready and need to be reconciled"}},
		{"newest stopped", pod(v1.RestartPolicyAlways, nil, "a"), []*runtime.SandboxStatus{sb("s2", notReady, podNS), sb("s1", ready, podNS, "127.88.0.1")},
			wantCond{v1.ConditionFalse, "PodSandboxNotReady", "pod sandbox is not ready"}},
		{"host network on a pod network namespace", hostNet, []*runtime.SandboxStatus{sb("s1", ready, podNS, "127.88.0.1")},
			wantCond{v1.ConditionFalse, "PodSandboxNotReady", "network namespace mode changed and sandbox needs to be recreated"}},
		{"host network", hostNet, []*runtime.SandboxStatus{sb("s1", ready, nodeNS)},
			wantCond{v1.ConditionTrue, "", ""}},
		{"pod network without an IP", pod(v1.RestartPolicyAlways, nil, "a"), []*runtime.SandboxStatus{sb("s1", ready, podNS)},
			wantCond{v1.ConditionFalse, "PodSandboxNotReady", "pod sandbox has no IP address"}},
		{"finished pod, sandbox still up", pod(v1.RestartPolicyNever, nil, "a"), []*runtime.SandboxStatus{sb("s1", ready, podNS, "127.88.0.1")},
			wantCond{v1.ConditionTrue, "", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &runtime.PodStatus{SandboxStatuses: tc.sandboxes, ContainerStatuses: []*runtime.ContainerStatus{c("a", exited, 0, 0)}}
			if len(tc.sandboxes) > 0 {
				obs.IPs = tc.sandboxes[0].IPs
			}
			s := status.Generate(status.Input{Pod: tc.pod, Runtime: obs, NodeIPs: []string{"127.0.0.1"}, Now: now})
			checkConds(t, s, map[v1.PodConditionType]wantCond{v1.PodReadyToStartContainers: tc.want})
		})
	}
}

func TestInitContainerStatuses(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, []string{"first", "second", "third"}, "app")
	for _, tc := range []struct {
		name  string
		obs   *runtime.PodStatus
		ready []bool
		state []string
	}{
		{"first running", observed(c("first", running, 0, 0)),
			[]bool{false, false, false}, []string{"running", "waiting PodInitializing", "waiting PodInitializing"}},
		{"first done, second running", observed(c("second", running, 0, 0), c("first", exited, 0, 0)),
			[]bool{true, false, false}, []string{`terminated 0  ""`, "running", "waiting PodInitializing"}},
		{"first failed", observed(c("first", exited, 1, 0)),
			[]bool{false, false, false}, []string{`terminated 1  ""`, "waiting PodInitializing", "waiting PodInitializing"}},
		{"all done", observed(c("app", running, 0, 0), c("third", exited, 0, 0), c("second", exited, 0, 0), c("first", exited, 0, 0)),
			[]bool{true, true, true}, []string{`terminated 0  ""`, `terminated 0  ""`, `terminated 0  ""`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.Generate(status.Input{Pod: p, Runtime: tc.obs, Now: now})
			for i, st := range s.InitContainerStatuses {
				if st.Ready != tc.ready[i] {
					t.Errorf("%s: ready %v, want %v", st.Name, st.Ready, tc.ready[i])
				}
				if got := terminated(st.State); got != tc.state[i] {
					t.Errorf("%s: %s, want %s", st.Name, got, tc.state[i])
				}
			}
		})
	}
}

func TestNeedToReconcileReadiness(t *testing.T) {
	const gate = v1.PodConditionType("example.com/gate")
	gated := func(conds ...v1.PodCondition) *v1.Pod {
		p := pod(v1.RestartPolicyAlways, nil, "a")
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate}}
		p.Status.Conditions = conds
		return p
	}
	cr := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
	readyTrue := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
	notReady := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ReadinessGatesNotReady",
		Message: `corresponding condition of pod readiness gate "example.com/gate" does not exist.`}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"no gates", pod(v1.RestartPolicyAlways, nil, "a"), false},
		{"no Ready yet", gated(cr, v1.PodCondition{Type: gate, Status: v1.ConditionTrue}), false},
		{"gate went True", gated(cr, notReady, v1.PodCondition{Type: gate, Status: v1.ConditionTrue}), true},
		{"gate went False", gated(cr, readyTrue, v1.PodCondition{Type: gate, Status: v1.ConditionFalse}), true},
		{"Ready agrees: gate True", gated(cr, readyTrue, v1.PodCondition{Type: gate, Status: v1.ConditionTrue}), false},
		{"Ready agrees: gate missing", gated(cr, notReady), false},
	} {
		if got := status.NeedToReconcileReadiness(tc.pod); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The status and every condition it makes record the generation of the
// spec they were made from, as the kubelet's; a static pod (generation 0)
// records none.
func TestGenerateRecordsObservedGeneration(t *testing.T) {
	for _, gen := range []int64{0, 7} {
		p := pod(v1.RestartPolicyAlways, []string{"init"}, "app")
		p.Generation = gen
		for _, stage := range []status.Stage{status.Syncing, status.Terminated} {
			s := status.Generate(status.Input{Pod: p, Runtime: observed(c("init", exited, 0, 0), c("app", running, 0, 0)), Stage: stage, Now: now})
			if s.ObservedGeneration != gen {
				t.Errorf("generation %d, stage %v: observedGeneration %d", gen, stage, s.ObservedGeneration)
			}
			if len(s.Conditions) < 5 {
				t.Fatalf("generation %d, stage %v: conditions %+v", gen, stage, s.Conditions)
			}
			for _, cond := range s.Conditions {
				if cond.ObservedGeneration != gen {
					t.Errorf("generation %d, stage %v: condition %s has observedGeneration %d", gen, stage, cond.Type, cond.ObservedGeneration)
				}
			}
		}
	}
}
