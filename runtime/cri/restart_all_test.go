package cri_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// Restarting all containers (restart rules with the action
// RestartAllContainers), on fakecri through SyncPod, round by round: the
// pods of the upstream NodeConformance specs "Pod Extended
// (RestartAllContainers)" (test/e2e/common/node/container_restart_policy.go),
// and the cases that must not restart all.

// allOn42 are the specs' rules: exit code 42 restarts all containers.
var allOn42 = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
	ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}

// restartAllPod builds a pod from init and regular container specs.
func restartAllPod(policy v1.RestartPolicy, inits, containers []v1.Container) *v1.Pod {
	p := testPod(policy, nil)
	p.Spec.InitContainers, p.Spec.Containers = inits, containers
	return p
}

// ctrSpec is a container; policy "" leaves its restartPolicy unset; env
// scripts it in fakecri (FAKECRI_* pairs).
func ctrSpec(name string, policy v1.ContainerRestartPolicy, rules []v1.ContainerRestartRule, env ...string) v1.Container {
	c := v1.Container{Name: name, Image: "busybox:1.36", RestartPolicyRules: rules}
	if policy != "" {
		c.RestartPolicy = &policy
	}
	withEnv(&c, env...)
	return c
}

// syncUntil syncs the pod until its observed states satisfy done, at most
// ten rounds, and returns the steps of each round.
func (h *harness) syncUntil(pod *v1.Pod, what string, done func(map[string]string) bool) [][]string {
	h.t.Helper()
	var rounds [][]string
	for range 10 {
		if done(states(h.status(pod))) {
			return rounds
		}
		rounds = append(rounds, steps(h.sync(pod)))
	}
	if !done(states(h.status(pod))) {
		h.t.Fatalf("after 10 rounds the pod does not %s: %v\nrounds: %q", what, states(h.status(pod)), rounds)
	}
	return rounds
}

// exit makes the newest instance of the named container, which runs,
// exit with code.
func (h *harness) exit(pod *v1.Pod, name string, code int32) {
	h.t.Helper()
	c := h.status(pod).FindContainerStatus(name)
	if c == nil || c.State != runtime.ContainerStateRunning {
		h.t.Fatalf("%s is %+v, want it running", name, c)
	}
	if err := h.fake.Exit(c.ID.ID, code, ""); err != nil {
		h.t.Fatal(err)
	}
}

// ids is the ID of every container instance of the pod.
func ids(st *runtime.PodStatus) []string {
	var out []string
	for _, c := range st.ContainerStatuses {
		out = append(out, c.ID.ID)
	}
	return out
}

// is returns a condition on the states: each named container's newest
// instance is in the given state/exit/restarts.
func is(want map[string]string) func(map[string]string) bool {
	return func(got map[string]string) bool {
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}
}

// checkReset checks the round that restarts all containers: it removes
// every instance, in order (killing those that run with the shortest
// grace period), starts nothing, keeps the sandbox, and leaves the pod
// with no container.
func (h *harness) checkReset(pod *v1.Pod, want []string, killed []string) {
	h.t.Helper()
	before := h.status(pod)
	running := map[string]string{} // name -> id of running instances
	for _, c := range before.ContainerStatuses {
		if c.State == runtime.ContainerStateRunning {
			running[c.Name] = c.ID.ID
		}
	}
	res := h.sync(pod)
	if diff := cmp.Diff(want, steps(res)); diff != "" {
		h.t.Fatalf("the round after the exit (-want +got):\n%s", diff)
	}
	after := h.status(pod)
	if len(after.ContainerStatuses) != 0 {
		h.t.Errorf("containers left after the reset: %v", states(after))
	}
	if len(after.SandboxStatuses) != 1 || after.SandboxStatuses[0].ID != before.SandboxStatuses[0].ID || after.SandboxStatuses[0].State != runtime.SandboxStateReady {
		h.t.Errorf("sandboxes after the reset %+v, want the same ready one", after.SandboxStatuses)
	}
	var gotKilled []string
	for name, id := range running {
		if timeout, ok := h.rec.stops[id]; ok {
			gotKilled = append(gotKilled, name)
			if timeout != 2 {
				h.t.Errorf("%s stopped with %ds, want 2", name, timeout)
			}
		}
	}
	slices.Sort(gotKilled)
	slices.Sort(killed)
	if diff := cmp.Diff(killed, gotKilled); diff != "" {
		h.t.Errorf("killed (-want +got):\n%s", diff)
	}
}

func removes(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, "RemoveContainer "+n)
	}
	return out
}

// "should restart all containers on regular container exit": the init
// container runs again, then the sidecar, then both regular containers,
// each with one more restart; the first run's logs are kept.
func TestSyncPodRestartAllOnRegularContainerExit(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := restartAllPod(v1.RestartPolicyNever,
		[]v1.Container{
			ctrSpec("init", "", nil, fakecri.EnvExitCode, "0"),
			ctrSpec("sidecar", v1.ContainerRestartPolicyAlways, nil),
		},
		[]v1.Container{
			ctrSpec("source-container", v1.ContainerRestartPolicyNever, allOn42),
			ctrSpec("regular", "", nil),
		})
	h.syncUntil(pod, "run", is(map[string]string{"init": "exited/0/0", "sidecar": "running/0/0", "source-container": "running/0/0", "regular": "running/0/0"}))

	h.exit(pod, "source-container", 42)
	h.checkReset(pod, removes("regular", "init", "sidecar", "source-container"), []string{"regular", "sidecar"})

	rounds := h.syncUntil(pod, "run again", is(map[string]string{"init": "exited/0/1", "sidecar": "running/0/1", "source-container": "running/0/1", "regular": "running/0/1"}))
	if diff := cmp.Diff([][]string{{"StartContainer init"}, {"StartContainer sidecar"}, {"StartContainer source-container", "StartContainer regular"}}, rounds); diff != "" {
		t.Errorf("rounds after the reset (-want +got):\n%s", diff)
	}
	if got := steps(h.sync(pod)); got != nil {
		t.Errorf("a further round did %q, want nothing", got)
	}
	for _, name := range []string{"init", "sidecar", "source-container", "regular"} {
		dir := filepath.Join(h.logs, "ns_p_uid-p", name)
		if got := listLogs(t, dir); !slices.Equal(got, []string{"0.log", "1.log"}) {
			t.Errorf("%s logs %v, want the first run's 0.log kept beside 1.log", name, got)
		}
	}
}

func listLogs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			out = append(out, e.Name())
		}
	}
	return out
}

// "should restart all containers on sidecar container exit".
func TestSyncPodRestartAllOnSidecarExit(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := restartAllPod(v1.RestartPolicyNever,
		[]v1.Container{
			ctrSpec("init", "", nil, fakecri.EnvExitCode, "0"),
			ctrSpec("sidecar", v1.ContainerRestartPolicyAlways, nil),
			ctrSpec("source-sidecar", v1.ContainerRestartPolicyAlways, allOn42),
		},
		[]v1.Container{ctrSpec("regular", "", nil)})
	h.syncUntil(pod, "run", is(map[string]string{"init": "exited/0/0", "sidecar": "running/0/0", "source-sidecar": "running/0/0", "regular": "running/0/0"}))

	h.exit(pod, "source-sidecar", 42)
	h.checkReset(pod, removes("regular", "init", "sidecar", "source-sidecar"), []string{"regular", "sidecar"})

	rounds := h.syncUntil(pod, "run again", is(map[string]string{"init": "exited/0/1", "sidecar": "running/0/1", "source-sidecar": "running/0/1", "regular": "running/0/1"}))
	if diff := cmp.Diff([][]string{{"StartContainer init"}, {"StartContainer sidecar"}, {"StartContainer source-sidecar"}, {"StartContainer regular"}}, rounds); diff != "" {
		t.Errorf("rounds after the reset (-want +got):\n%s", diff)
	}
}

// "should restart init and sidecar containers on init container exit":
// the regular container, which never ran, is not part of the reset.
func TestSyncPodRestartAllOnInitContainerExit(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := restartAllPod(v1.RestartPolicyNever,
		[]v1.Container{
			ctrSpec("sidecar", v1.ContainerRestartPolicyAlways, nil),
			ctrSpec("init", "", nil, fakecri.EnvExitCode, "0"),
			ctrSpec("source-init", v1.ContainerRestartPolicyNever, allOn42, fakecri.EnvExitCode, "42"),
		},
		[]v1.Container{ctrSpec("regular", "", nil)})
	h.syncUntil(pod, "fail its last init container", is(map[string]string{"sidecar": "running/0/0", "init": "exited/0/0", "source-init": "exited/42/0"}))
	if _, ok := states(h.status(pod))["regular"]; ok {
		t.Fatal("the regular container ran before the init containers completed")
	}

	h.checkReset(pod, removes("sidecar", "init", "source-init"), []string{"sidecar"})

	h.fake.Script(fakecri.Match{Container: "source-init"}, fakecri.Behavior{Exit: true})
	rounds := h.syncUntil(pod, "run again", is(map[string]string{"sidecar": "running/0/1", "init": "exited/0/1", "source-init": "exited/0/1", "regular": "running/0/0"}))
	if diff := cmp.Diff([][]string{{"StartContainer sidecar"}, {"StartContainer init"}, {"StartContainer source-init"}, {"StartContainer regular"}}, rounds); diff != "" {
		t.Errorf("rounds after the reset (-want +got):\n%s", diff)
	}
}

// "should allow multiple RestartAllContainers actions and not introduce a
// loop": the other container, which has the same rule, is killed by the
// reset, and its exit (SIGTERM, 143) is never seen: it is removed, so
// there is one restart of all, not two.
func TestSyncPodRestartAllDoesNotLoop(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := restartAllPod(v1.RestartPolicyNever, nil, []v1.Container{
		ctrSpec("source-container", v1.ContainerRestartPolicyNever, allOn42),
		ctrSpec("regular", v1.ContainerRestartPolicyNever, allOn42, fakecri.EnvTermExitCode, "42"),
	})
	h.syncUntil(pod, "run", is(map[string]string{"source-container": "running/0/0", "regular": "running/0/0"}))

	h.exit(pod, "source-container", 42)
	h.checkReset(pod, removes("regular", "source-container"), []string{"regular"})
	h.syncUntil(pod, "run again", is(map[string]string{"source-container": "running/0/1", "regular": "running/0/1"}))
	first := ids(h.status(pod))
	for i := range 3 {
		if got := steps(h.sync(pod)); got != nil {
			t.Fatalf("round %d after the restart did %q, want nothing", i+1, got)
		}
	}
	if got := ids(h.status(pod)); !slices.Equal(first, got) {
		t.Errorf("containers %v became %v, want them left running", first, got)
	}
}

// "should restart all containers on a previously restarted regular
// container exit": every instance goes, the older ones included (the one
// that exited 1 with the others, in spec order, before the one that
// triggered the restart), and the restart counts go on from the highest.
func TestSyncPodRestartAllRemovesEveryInstance(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := restartAllPod(v1.RestartPolicyAlways, nil, []v1.Container{
		ctrSpec("source-container", v1.ContainerRestartPolicyAlways, allOn42),
		ctrSpec("regular", "", nil),
	})
	h.syncUntil(pod, "run", is(map[string]string{"source-container": "running/0/0", "regular": "running/0/0"}))
	h.exit(pod, "source-container", 1)
	h.syncUntil(pod, "restart the source", is(map[string]string{"source-container": "running/0/1"}))

	h.exit(pod, "source-container", 42)
	h.checkReset(pod, removes("source-container", "regular", "source-container"), []string{"regular"})
	h.syncUntil(pod, "run again", is(map[string]string{"source-container": "running/0/2", "regular": "running/0/1"}))
}

// A pod with restartPolicy Never whose regular container completed, so
// that it would be done once the other exits: an exit that matches a
// RestartAllContainers rule restarts both instead.
func TestSyncPodRestartAllInANeverPodThatFinished(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := restartAllPod(v1.RestartPolicyNever, nil, []v1.Container{
		ctrSpec("source-container", v1.ContainerRestartPolicyNever, allOn42),
		ctrSpec("job", "", nil),
	})
	h.syncUntil(pod, "run", is(map[string]string{"source-container": "running/0/0", "job": "running/0/0"}))
	h.exit(pod, "job", 0)
	if got := steps(h.sync(pod)); got != nil {
		t.Fatalf("after the job completed: %q, want nothing (its pod is Never)", got)
	}

	h.exit(pod, "source-container", 42)
	h.checkReset(pod, removes("job", "source-container"), nil)
	h.syncUntil(pod, "run again", is(map[string]string{"source-container": "running/0/1", "job": "running/0/1"}))
}

// An exit code the rule does not match restarts nothing else: the
// container's own Never decides, and the other container runs on.
func TestSyncPodRestartAllNotOnAnotherExitCode(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := restartAllPod(v1.RestartPolicyNever,
		[]v1.Container{ctrSpec("sidecar", v1.ContainerRestartPolicyAlways, nil)},
		[]v1.Container{
			ctrSpec("source-container", v1.ContainerRestartPolicyNever, allOn42),
			ctrSpec("regular", "", nil),
		})
	h.syncUntil(pod, "run", is(map[string]string{"sidecar": "running/0/0", "source-container": "running/0/0", "regular": "running/0/0"}))
	before := ids(h.status(pod))

	h.exit(pod, "source-container", 1)
	if got := steps(h.sync(pod)); got != nil {
		t.Fatalf("the round after exit code 1 did %q, want nothing", got)
	}
	if diff := cmp.Diff(map[string]string{"sidecar": "running/0/0", "source-container": "exited/1/0", "regular": "running/0/0"}, states(h.status(pod))); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if got := ids(h.status(pod)); !slices.Equal(before, got) {
		t.Errorf("containers %v became %v, want the same", before, got)
	}

	// Once the regular container ends too, the pod is done: killed, the
	// sidecar with it, and nothing restarted.
	h.exit(pod, "regular", 0)
	if diff := cmp.Diff([]string{"KillPod ns/p"}, steps(h.sync(pod))); diff != "" {
		t.Errorf("once nothing regular runs (-want +got):\n%s", diff)
	}
}

// ComputePodActions' choices for a restart of all containers beyond the
// specs' pods.
func TestComputePodActionsRestartAll(t *testing.T) {
	never := v1.RestartPolicyNever
	pod := func() *v1.Pod {
		return restartAllPod(never,
			[]v1.Container{ctrSpec("init", "", nil), ctrSpec("sidecar", v1.ContainerRestartPolicyAlways, nil)},
			[]v1.Container{ctrSpec("source", v1.ContainerRestartPolicyNever, allOn42), ctrSpec("other", "", nil)})
	}
	id := func(name string) runtime.ContainerID { return runtime.ContainerID{Type: "fake", ID: "id-" + name} }
	sb := func() []*runtime.SandboxStatus { return []*runtime.SandboxStatus{readySandbox(0)} }
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		obs  func(*v1.Pod) observed
		want cri.PodActions
	}{
		{
			name: "source exited 42: everything is removed, the running ones killed, the source last",
			pod:  pod(),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "source", exited, 42), ctr(p, "other", running, 0), ctr(p, "sidecar", running, 0), ctr(p, "init", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToReset: []cri.ContainerToReset{
				{ID: id("other"), Name: "other", Kill: true}, {ID: id("init"), Name: "init"}, {ID: id("sidecar"), Name: "sidecar", Kill: true}, {ID: id("source"), Name: "source"}}},
		},
		{
			name: "a container in the created or unknown state is killed too",
			pod:  pod(),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "source", exited, 42), ctr(p, "other", created, 0), ctr(p, "sidecar", unknown, 0), ctr(p, "init", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToReset: []cri.ContainerToReset{
				{ID: id("other"), Name: "other", Kill: true}, {ID: id("init"), Name: "init"}, {ID: id("sidecar"), Name: "sidecar", Kill: true}, {ID: id("source"), Name: "source"}}},
		},
		{
			name: "only the newest instance triggers it: an older exit 42 does not",
			pod:  pod(),
			obs: func(p *v1.Pod) observed {
				old := ctr(p, "source", exited, 42)
				old.ID.ID = "id-source-old"
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "source", running, 0), ctr(p, "other", running, 0), ctr(p, "sidecar", running, 0), ctr(p, "init", exited, 0), old}}
			},
			want: cri.PodActions{SandboxID: "sb"},
		},
		{
			name: "the sandbox must be replaced as well: the pod is killed and a sandbox created, nothing started",
			pod:  pod(),
			obs: func(p *v1.Pod) observed {
				s := readySandbox(0)
				s.State = runtime.SandboxStateNotReady
				return observed{[]*runtime.SandboxStatus{s}, []*runtime.ContainerStatus{ctr(p, "source", exited, 42), ctr(p, "init", exited, 0)}}
			},
			want: cri.PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb", Attempt: 1},
		},
		{
			name: "a pod marked for deletion is not restarted",
			pod: func() *v1.Pod {
				p := pod()
				p.DeletionTimestamp = &metav1.Time{Time: t0}
				return p
			}(),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "source", exited, 42), ctr(p, "other", running, 0), ctr(p, "sidecar", running, 0), ctr(p, "init", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb"},
		},
		{
			name: "ephemeral containers are left alone",
			pod: func() *v1.Pod {
				p := pod()
				p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "busybox:1.36"}}}
				return p
			}(),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "debug", running, 0), ctr(p, "source", exited, 42), ctr(p, "other", exited, 0), ctr(p, "init", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb", ContainersToReset: []cri.ContainerToReset{
				{ID: id("other"), Name: "other"}, {ID: id("init"), Name: "init"}, {ID: id("source"), Name: "source"}}},
		},
		{
			name: "exit code not matched: the container's own Never decides",
			pod:  pod(),
			obs: func(p *v1.Pod) observed {
				return observed{sb(), []*runtime.ContainerStatus{ctr(p, "source", exited, 1), ctr(p, "other", running, 0), ctr(p, "sidecar", running, 0), ctr(p, "init", exited, 0)}}
			},
			want: cri.PodActions{SandboxID: "sb"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cri.ComputePodActions(tc.pod, tc.obs(tc.pod).status(), nil)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}
