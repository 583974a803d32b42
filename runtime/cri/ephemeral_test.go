package cri_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/fakecri"
)

// An ephemeral container added to a running pod starts in its sandbox
// without touching the other containers, joins its target's process
// namespace, and is never started again once it exits.
func TestSyncPodStartsEphemeralContainersOnce(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	h.sync(pod)
	sandbox := h.status(pod).SandboxStatuses[0].ID
	app := h.status(pod).FindContainerStatus("app").ID.ID

	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1.36", Stdin: true, TTY: true,
			Env: []v1.EnvVar{{Name: fakecri.EnvExitAfter, Value: "1s"}}},
		TargetContainerName: "app",
	}}
	if diff := cmp.Diff([]string{"StartContainer debugger"}, steps(h.sync(pod))); diff != "" {
		t.Fatalf("steps after adding the ephemeral container (-want +got):\n%s", diff)
	}
	st := h.status(pod)
	dbg := st.FindContainerStatus("debugger")
	if dbg == nil || dbg.SandboxID != sandbox {
		t.Fatalf("debugger %+v, want it in sandbox %s", dbg, sandbox)
	}
	if got := st.FindContainerStatus("app").ID.ID; got != app {
		t.Errorf("app is now %s, was %s: the ephemeral container restarted it", got, app)
	}
	cfg := h.rec.config("debugger")
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != app {
		t.Errorf("debugger's PID namespace %v target %q, want TARGET %q", ns.GetPid(), ns.GetTargetId(), app)
	}
	if !cfg.GetStdin() || !cfg.GetTty() {
		t.Errorf("debugger stdin %v tty %v, want both", cfg.GetStdin(), cfg.GetTty())
	}

	h.clock.Step(2 * time.Second) // the debugger exits
	for i := 0; i < 3; i++ {
		h.clock.Step(5 * time.Minute) // past any restart back-off
		if s := steps(h.sync(pod)); len(s) != 0 {
			t.Fatalf("round %d after the debugger exited: %v, want nothing", i+1, s)
		}
	}
	if got := states(h.status(pod)); got["debugger"] != "exited/0/0" || got["app"] != "running/0/0" {
		t.Errorf("states %v, want the debugger exited once and app running", got)
	}
}

// An ephemeral container whose target is not in the runtime is not
// created: CreateContainerConfigError, naming the field.
func TestSyncPodEphemeralContainerWithoutItsTarget(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, []string{"init"}, "app")
	withEnv(&pod.Spec.InitContainers[0], fakecri.EnvExitAfter, "1h")
	h.sync(pod) // the init container runs; app does not exist yet
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1.36"},
		TargetContainerName:      "app",
	}}
	res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
	if len(res.Steps) != 1 || res.Steps[0].Reason != "CreateContainerConfigError" ||
		!strings.Contains(res.Steps[0].Message, `spec.ephemeralContainers[debugger].targetContainerName: unable to find target container "app"`) {
		t.Fatalf("steps %+v, want one CreateContainerConfigError naming the target", res.Steps)
	}
	if h.rec.config("debugger") != nil {
		t.Error("the debugger was created without its target")
	}
}

// A container's restart rules decide on fakecri as in ComputePodActions:
// exit 42 matches the Restart rule and restarts it despite
// restartPolicy Never; exit 1 does not and it stays exited.
func TestSyncPodContainerRestartRules(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	for _, tc := range []struct {
		code, want string
	}{{"42", "exited/42/2"}, {"1", "exited/1/0"}} {
		t.Run("exit-"+tc.code, func(t *testing.T) {
			h := newHarness(t, fakecri.Config{})
			pod := testPod(v1.RestartPolicyNever, nil, "main")
			c := &pod.Spec.Containers[0]
			c.RestartPolicy = &never
			c.RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
			withEnv(c, fakecri.EnvExitCode, tc.code)
			for i := 0; i < 3; i++ {
				h.sync(pod)
				h.clock.Step(5 * time.Minute)
			}
			if got := states(h.status(pod))["main"]; got != tc.want {
				t.Errorf("after 3 syncs: %s, want %s", got, tc.want)
			}
		})
	}
}
