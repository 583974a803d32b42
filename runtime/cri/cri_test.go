package cri_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// recorder wraps fakecri to record the StopContainer timeouts and to
// corrupt answers on demand.
type recorder struct {
	*fakecri.Runtime
	mu        sync.Mutex
	stops     map[string]int64
	stopOrder []string // container names, in the order they were stopped
	configs   map[string]*runtimeapi.ContainerConfig
	sandboxes []*runtimeapi.PodSandboxConfig
	auths     []*runtimeapi.AuthConfig
	badState  bool
}

func (r *recorder) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.mu.Lock()
	r.stops[id] = timeout
	if st, err := r.Runtime.ContainerStatus(ctx, id, false); err == nil {
		r.stopOrder = append(r.stopOrder, st.GetStatus().GetMetadata().GetName())
	}
	r.mu.Unlock()
	return r.Runtime.StopContainer(ctx, id, timeout)
}

func (r *recorder) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.configs[cfg.GetMetadata().GetName()] = cfg
	r.mu.Unlock()
	return r.Runtime.CreateContainer(ctx, sb, cfg, sbCfg)
}

func (r *recorder) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.mu.Lock()
	r.sandboxes = append(r.sandboxes, cfg)
	r.mu.Unlock()
	return r.Runtime.RunPodSandbox(ctx, cfg, handler)
}

func (r *recorder) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.auths = append(r.auths, auth)
	r.mu.Unlock()
	return r.Runtime.PullImage(ctx, img, auth, sb)
}

func (r *recorder) config(name string) *runtimeapi.ContainerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.configs[name]
}

func (r *recorder) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	list, err := r.Runtime.ListContainers(ctx, f)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.badState && len(list) > 0 {
		list[0].State = runtimeapi.ContainerState(42)
	}
	return list, err
}

type harness struct {
	t      *testing.T
	fake   *fakecri.Runtime
	rec    *recorder
	rt     *cri.Runtime
	clock  *clocktesting.FakeClock
	logs   string
	ctx    context.Context
	mu     sync.Mutex
	events []string // "reason: message"
}

func newHarness(t *testing.T, cfg fakecri.Config, opts ...func(*cri.Config)) *harness {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	cfg.Clock = clk
	cfg.Images = append(cfg.Images, "busybox:1.36")
	fake, err := fakecri.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Runtime: fake, stops: map[string]int64{}, configs: map[string]*runtimeapi.ContainerConfig{}}
	h := &harness{t: t, fake: fake, rec: rec, clock: clk, logs: t.TempDir(), ctx: context.Background()}
	rcfg := cri.Config{
		RuntimeService: rec,
		ImageService:   rec,
		PodLogsDir:     h.logs,
		PodsDir:        t.TempDir(),
		Clock:          clk,
		Events: func(_ *v1.Pod, _, reason, msg string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, reason+": "+msg)
		},
	}
	for _, o := range opts {
		o(&rcfg)
	}
	h.rt, err = cri.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// eventsWith returns the recorded events whose reason is reason.
func (h *harness) eventsWith(reason string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		if strings.HasPrefix(e, reason+": ") {
			out = append(out, e)
		}
	}
	return out
}

func (h *harness) status(pod *v1.Pod) *runtime.PodStatus {
	h.t.Helper()
	st, err := h.rt.GetPodStatus(h.ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// sync observes the pod and syncs it once, failing on any error.
func (h *harness) sync(pod *v1.Pod) *runtime.SyncResult {
	h.t.Helper()
	res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
	if err := res.Error(); err != nil {
		h.t.Fatalf("SyncPod: %v", err)
	}
	return res
}

func steps(res *runtime.SyncResult) []string {
	var out []string
	for _, s := range res.Steps {
		out = append(out, string(s.Action)+" "+s.Target)
	}
	return out
}

// states summarises the newest instance of each container:
// name=state/exit/restarts.
func states(st *runtime.PodStatus) map[string]string {
	out := map[string]string{}
	for _, c := range st.ContainerStatuses {
		if _, seen := out[c.Name]; !seen {
			out[c.Name] = string(c.State) + "/" + strconv.Itoa(c.ExitCode) + "/" + strconv.Itoa(c.RestartCount)
		}
	}
	return out
}

func withEnv(c *v1.Container, kv ...string) {
	for i := 0; i < len(kv); i += 2 {
		c.Env = append(c.Env, v1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
}

func TestSyncPodRunsInitContainersInOrderThenContainers(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "app")
	withEnv(&pod.Spec.InitContainers[0], fakecri.EnvExitCode, "0")
	withEnv(&pod.Spec.InitContainers[1], fakecri.EnvExitCode, "0")

	want := [][]string{
		{"CreatePodSandbox ns/p", "StartContainer i1"},
		{"StartContainer i2"},
		{"StartContainer app"},
		nil,
	}
	for i, w := range want {
		if diff := cmp.Diff(w, steps(h.sync(pod))); diff != "" {
			t.Fatalf("round %d (-want +got):\n%s", i+1, diff)
		}
	}
	if diff := cmp.Diff(map[string]string{"i1": "exited/0/0", "i2": "exited/0/0", "app": "running/0/0"}, states(h.status(pod))); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
}

func TestSyncPodRestartPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy v1.RestartPolicy
		code   string
		want   string
	}{
		{v1.RestartPolicyAlways, "0", "exited/0/2"},
		{v1.RestartPolicyAlways, "1", "exited/1/2"},
		{v1.RestartPolicyOnFailure, "0", "exited/0/0"},
		{v1.RestartPolicyOnFailure, "1", "exited/1/2"},
		{v1.RestartPolicyNever, "1", "exited/1/0"},
	} {
		t.Run(string(tc.policy)+"-exit-"+tc.code, func(t *testing.T) {
			h := newHarness(t, fakecri.Config{})
			pod := testPod(tc.policy, nil, "job")
			withEnv(&pod.Spec.Containers[0], fakecri.EnvExitCode, tc.code)
			for i := 0; i < 3; i++ {
				h.sync(pod)
				h.clock.Step(5 * time.Minute) // past any restart back-off
			}
			if got := states(h.status(pod))["job"]; got != tc.want {
				t.Errorf("after 3 syncs: %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSyncPodWritesKubeletLabelsAndLogLayout(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Labels = map[string]string{"tier": "web"}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7)
	withEnv(&pod.Spec.Containers[0], fakecri.EnvLog, "hello", "GREETING", "hi")
	h.sync(pod)

	st := h.status(pod)
	sb := st.SandboxStatuses[0]
	for k, v := range map[string]string{cri.LabelPodName: "p", cri.LabelPodNamespace: "ns", cri.LabelPodUID: "uid-p", "tier": "web"} {
		if sb.Labels[k] != v {
			t.Errorf("sandbox label %s = %q, want %q", k, sb.Labels[k], v)
		}
	}
	if len(st.IPs) != 1 || !strings.HasPrefix(st.IPs[0], "127.88.") {
		t.Errorf("pod IPs %v, want one from fakecri's range", st.IPs)
	}
	c := st.FindContainerStatus("app")
	if c.Labels[cri.LabelContainerName] != "app" || c.Annotations[cri.AnnotationPodTerminationGracePeriod] != "7" {
		t.Errorf("container labels %v annotations %v", c.Labels, c.Annotations)
	}
	if c.Hash != cri.HashContainer(&pod.Spec.Containers[0]) {
		t.Errorf("recorded hash %x, want the spec's", c.Hash)
	}
	wantLog := filepath.Join(h.logs, "ns_p_uid-p", "app", "0.log")
	if c.LogPath != wantLog {
		t.Errorf("log path %q, want %q", c.LogPath, wantLog)
	}
	if data, err := os.ReadFile(wantLog); err != nil || !strings.Contains(string(data), "stdout F hello") {
		t.Errorf("log file: %q %v", data, err)
	}
	out, _, err := h.fake.ExecSync(h.ctx, c.ID.ID, []string{"env"}, 0)
	if err != nil || !strings.Contains(string(out), "GREETING=hi") {
		t.Errorf("env in the container: %q %v", out, err)
	}
}

func TestSyncPodRestartsOnSpecChange(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	h.sync(pod)
	first := h.status(pod).FindContainerStatus("app").ID

	pod.Spec.Containers[0].Args = []string{"--new"}
	res := h.sync(pod)
	if diff := cmp.Diff([]string{"KillContainer app", "StartContainer app"}, steps(res)); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	st := h.status(pod)
	now := st.FindContainerStatus("app")
	if now.ID == first || now.State != runtime.ContainerStateRunning || now.RestartCount != 1 {
		t.Errorf("after the change: %+v, want a new running container with restart count 1", now)
	}
	if h.rec.stops[first.ID] != 30 {
		t.Errorf("old container stopped with %ds, want the default 30", h.rec.stops[first.ID])
	}
}

func TestSyncPodImageErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		image  string
		policy v1.PullPolicy
		fake   fakecri.Config
		reason string
	}{
		{"empty image", "", "", fakecri.Config{}, cri.ReasonInvalidImageName},
		{"invalid name", "Not A/Valid:Name!", "", fakecri.Config{}, cri.ReasonInvalidImageName},
		{"never pulled", "nodekit.test/absent:1", v1.PullNever, fakecri.Config{}, cri.ReasonErrImageNeverPull},
		{"pull fails", "nodekit.test/absent:1", v1.PullIfNotPresent, fakecri.Config{Registry: []string{}}, cri.ReasonErrImagePull},
		{"pull always fails", "busybox:1.36", v1.PullAlways, fakecri.Config{Registry: []string{}}, cri.ReasonErrImagePull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.fake)
			pod := testPod(v1.RestartPolicyAlways, nil, "bad", "good")
			pod.Spec.Containers[0].Image = tc.image
			pod.Spec.Containers[0].ImagePullPolicy = tc.policy
			res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
			var bad *runtime.SyncStep
			for i := range res.Steps {
				if res.Steps[i].Target == "bad" {
					bad = &res.Steps[i]
				}
			}
			if bad == nil || bad.Reason != tc.reason || !strings.Contains(bad.Message, `"bad"`) {
				t.Fatalf("step for the bad container: %+v, want reason %s and a message naming it", bad, tc.reason)
			}
			if got := states(h.status(pod))["good"]; got != "running/0/0" {
				t.Errorf("the other container: %q, want running", got)
			}
		})
	}
}

func TestKillPodGracePeriods(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     *int64
		deletion *int64
		override *int64
		want     int64
	}{
		{name: "default", want: 30},
		{name: "from the spec", spec: ptr.To[int64](12), want: 12},
		{name: "deletion grace wins", spec: ptr.To[int64](12), deletion: ptr.To[int64](5), want: 5},
		{name: "spec below the minimum", spec: ptr.To[int64](0), want: 2},
		{name: "override may go below it", spec: ptr.To[int64](12), override: ptr.To[int64](0), want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fakecri.Config{})
			pod := testPod(v1.RestartPolicyAlways, nil, "a", "b")
			pod.Spec.TerminationGracePeriodSeconds = tc.spec
			pod.DeletionGracePeriodSeconds = tc.deletion
			h.sync(pod)
			if err := h.rt.KillPod(h.ctx, pod, nil, tc.override); err != nil {
				t.Fatal(err)
			}
			st := h.status(pod)
			for _, c := range st.ContainerStatuses {
				if got := h.rec.stops[c.ID.ID]; got != tc.want {
					t.Errorf("container %s stopped with %ds, want %d", c.Name, got, tc.want)
				}
				if c.State != runtime.ContainerStateExited {
					t.Errorf("container %s is %s after KillPod", c.Name, c.State)
				}
			}
			if st.SandboxStatuses[0].State != runtime.SandboxStateNotReady {
				t.Errorf("sandbox is %s after KillPod", st.SandboxStatuses[0].State)
			}
			// Killing again is not an error.
			if err := h.rt.KillPod(h.ctx, pod, nil, tc.override); err != nil {
				t.Errorf("second KillPod: %v", err)
			}
		})
	}
}

func TestKillOrphanUsesRecordedGracePeriod(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](9)
	h.sync(pod)
	pods, err := h.rt.GetPods(h.ctx, false)
	if err != nil || len(pods) != 1 {
		t.Fatalf("GetPods: %v %v", pods, err)
	}
	if err := h.rt.KillPod(h.ctx, nil, pods[0], nil); err != nil {
		t.Fatal(err)
	}
	if got := h.rec.stops[pods[0].Containers[0].ID.ID]; got != 9 {
		t.Errorf("orphan stopped with %ds, want the recorded 9", got)
	}
}

func TestGetPods(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	a := testPod(v1.RestartPolicyAlways, nil, "x", "y")
	b := testPod(v1.RestartPolicyNever, nil, "z")
	b.Name, b.UID = "q", "uid-q"
	withEnv(&b.Spec.Containers[0], fakecri.EnvExitCode, "0")
	h.sync(a)
	h.sync(b)
	// A sandbox not made by an agent (no pod labels) is not listed.
	if _, err := h.fake.RunPodSandbox(h.ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "other", Namespace: "x", Uid: "x"}}, ""); err != nil {
		t.Fatal(err)
	}
	all, err := h.rt.GetPods(h.ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != "uid-p" || len(all[0].Containers) != 2 || all[1].FullName() != "ns/q" {
		t.Fatalf("GetPods(all): %+v", all)
	}
	if all[0].Containers[0].ID.Type != fakecri.RuntimeName {
		t.Errorf("container ID type %q, want %q", all[0].Containers[0].ID.Type, fakecri.RuntimeName)
	}
	running, err := h.rt.GetPods(h.ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	// q's only container exited, but its sandbox is still ready.
	if len(running) != 2 || len(running[1].Containers) != 0 || len(running[1].Sandboxes) != 1 {
		t.Errorf("GetPods(running): %+v", running)
	}
}

func TestInvalidRuntimeAnswerIsAnError(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	h.sync(pod)
	h.rec.mu.Lock()
	h.rec.badState = true
	h.rec.mu.Unlock()
	_, err := h.rt.GetPods(h.ctx, true)
	if !errors.Is(err, runtime.ErrInvalidResponse) || !strings.Contains(err.Error(), "unknown state 42") {
		t.Errorf("GetPods with a corrupt state: %v, want ErrInvalidResponse naming the state", err)
	}
}

func TestStatus(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	st, err := h.rt.Status(h.ctx)
	if err != nil || st.Ready() != nil {
		t.Fatalf("Status: %+v %v, want ready", st, err)
	}
	h.fake.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni config uninitialized")
	st, _ = h.rt.Status(h.ctx)
	if err := st.Ready(); !errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), "NetworkPluginNotReady") {
		t.Errorf("Ready with the network down: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	fake, _ := fakecri.New(fakecri.Config{})
	for _, cfg := range []cri.Config{
		{ImageService: fake},
		{RuntimeService: fake},
		{RuntimeService: fake, ImageService: fake, PodLogsDir: "relative/logs"},
	} {
		if _, err := cri.New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", cfg)
		}
	}
}

// A container of which the runtime has no instance, but whose earlier
// instances left logs (removed by a restart of all containers, or lost
// with the runtime's state), goes on counting from them, as the kubelet
// does: its restart count and log file are one past the highest N.log,
// rotated files included, and the old logs stay.
func TestSyncPodRestartCountFromLeftLogs(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	dir := filepath.Join(h.logs, "ns_p_uid-p", "app")
	if err := os.MkdirAll(filepath.Join(dir, "7.log.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"0.log", "2.log.20260101-000000.gz", "x.log", "+9.log", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("old\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h.sync(pod)
	c := h.status(pod).FindContainerStatus("app")
	if c.RestartCount != 3 || c.LogPath != filepath.Join(dir, "3.log") {
		t.Errorf("restart count %d, log %s; want 3 and 3.log", c.RestartCount, c.LogPath)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "0.log")); err != nil || string(data) != "old\n" {
		t.Errorf("0.log: %q %v, want it kept", data, err)
	}
}
