package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// hostDirs is a cri.Volumes that maps volume names to host directories.
type hostDirs map[string]string

func (h hostDirs) HostPath(_ *v1.Pod, name string) (string, error) {
	if p, ok := h[name]; ok {
		return p, nil
	}
	return "", fmt.Errorf("no directory for volume %q", name)
}

type podEnv struct {
	t     *testing.T
	rt    *cri.Runtime
	image string
	ctx   context.Context
}

// newPodEnv returns the pod runtime on the e2e containerd with short
// back-offs, so crash loops are observable within seconds.
func newPodEnv(t *testing.T, volumes hostDirs, opts ...func(*cri.Config)) *podEnv {
	t.Helper()
	client, image := dialContainerd(t)
	cfg := cri.Config{
		RuntimeService:   client,
		ImageService:     client,
		PodLogsDir:       t.TempDir(),
		PodsDir:          t.TempDir(),
		Volumes:          volumes,
		ResolvConf:       "-",
		CrashLoopBackOff: cri.BackOff{Initial: time.Second, Max: 4 * time.Second},
		ImagePullBackOff: cri.BackOff{Initial: 2 * time.Second, Max: 8 * time.Second},
	}
	for _, o := range opts {
		o(&cfg)
	}
	rt, err := cri.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &podEnv{t: t, rt: rt, image: image, ctx: ctx}
}

var podSeq int

func (e *podEnv) pod(policy v1.RestartPolicy, containers ...v1.Container) *v1.Pod {
	podSeq++
	name := fmt.Sprintf("e2e-%s-%d", strings.ToLower(strings.ReplaceAll(e.t.Name(), "/", "-")), podSeq)
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "e2e", UID: types.UID(fmt.Sprintf("uid-%d-%d", time.Now().UnixNano(), podSeq))},
		Spec:       v1.PodSpec{RestartPolicy: policy, TerminationGracePeriodSeconds: ptr.To[int64](2), Containers: containers},
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Image == "" {
			pod.Spec.Containers[i].Image = e.image
		}
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.rt.KillPod(ctx, pod, nil, ptr.To[int64](0)); err != nil {
			e.t.Errorf("cleanup: kill %s: %v", pod.Name, err)
		}
		gone := func(uid types.UID) bool { return uid == pod.UID }
		if err := e.rt.GarbageCollect(ctx, runtime.GCPolicy{MaxContainers: -1}, gone); err != nil {
			e.t.Errorf("cleanup: remove %s: %v", pod.Name, err)
		}
	})
	return pod
}

func (e *podEnv) status(pod *v1.Pod) *runtime.PodStatus {
	e.t.Helper()
	st, err := e.rt.GetPodStatus(e.ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// syncUntil syncs the pod every 200ms until cond holds on a fresh
// observation, for at most limit.
func (e *podEnv) syncUntil(pod *v1.Pod, limit time.Duration, what string, cond func(*runtime.PodStatus, *runtime.SyncResult) bool) *runtime.PodStatus {
	e.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		res := e.rt.SyncPod(e.ctx, pod, e.status(pod))
		st := e.status(pod)
		if cond(st, res) {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("not %s within %v; last status: %s; last sync: %s", what, limit, describe(st), describeSteps(res))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func describe(st *runtime.PodStatus) string {
	var parts []string
	for _, c := range st.ContainerStatuses {
		parts = append(parts, fmt.Sprintf("%s=%s/%d/%d", c.Name, c.State, c.ExitCode, c.RestartCount))
	}
	return strings.Join(parts, " ")
}

func describeSteps(res *runtime.SyncResult) string {
	var parts []string
	for _, s := range res.Steps {
		p := string(s.Action) + " " + s.Target
		if s.Err != nil {
			p += " (" + s.Reason + ": " + s.Message + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func sh(name, script string) v1.Container {
	return v1.Container{Name: name, Command: []string{"sh", "-c", script}}
}

const sleepForever = "trap 'exit 0' TERM; while true; do sleep 1; done"

func TestInitContainersRunInOrder(t *testing.T) {
	work := t.TempDir()
	e := newPodEnv(t, hostDirs{"work": work})
	pod := e.pod(v1.RestartPolicyAlways, sh("app", "cat /work/order > /work/seen; "+sleepForever))
	pod.Spec.Volumes = []v1.Volume{{Name: "work"}}
	mount := []v1.VolumeMount{{Name: "work", MountPath: "/work"}}
	pod.Spec.InitContainers = []v1.Container{
		sh("first", "sleep 1; echo first >> /work/order"),
		sh("second", "echo second >> /work/order"),
	}
	pod.Spec.InitContainers[0].Image, pod.Spec.InitContainers[1].Image = e.image, e.image
	pod.Spec.InitContainers[0].VolumeMounts, pod.Spec.InitContainers[1].VolumeMounts = mount, mount
	pod.Spec.Containers[0].VolumeMounts = mount

	st := e.syncUntil(pod, time.Minute, "running the app", func(st *runtime.PodStatus, _ *runtime.SyncResult) bool {
		c := st.FindContainerStatus("app")
		return c != nil && c.State == runtime.ContainerStateRunning
	})
	first, second, app := st.FindContainerStatus("first"), st.FindContainerStatus("second"), st.FindContainerStatus("app")
	if !second.StartedAt.After(first.FinishedAt) || !app.StartedAt.After(second.FinishedAt) {
		t.Errorf("start and finish times out of order: first %v-%v, second %v-%v, app %v", first.StartedAt, first.FinishedAt, second.StartedAt, second.FinishedAt, app.StartedAt)
	}
	deadline := time.Now().Add(10 * time.Second)
	var seen []byte
	for time.Now().Before(deadline) {
		if seen, _ = os.ReadFile(filepath.Join(work, "seen")); len(seen) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if string(seen) != "first\nsecond\n" {
		t.Errorf("the app saw %q, want the init containers' lines in order", seen)
	}
}

func TestCrashLoopBackOffOnContainerd(t *testing.T) {
	e := newPodEnv(t, nil)
	pod := e.pod(v1.RestartPolicyAlways, sh("crasher", "exit 3"))
	var starts []time.Time
	sawBackOff := false
	e.syncUntil(pod, 45*time.Second, "restarted four times", func(st *runtime.PodStatus, res *runtime.SyncResult) bool {
		for _, s := range res.Steps {
			if s.Reason == cri.ReasonCrashLoopBackOff {
				sawBackOff = true
			}
		}
		starts = starts[:0]
		for _, c := range st.ContainerStatusesByName("crasher") {
			starts = append([]time.Time{c.StartedAt}, starts...)
		}
		c := st.FindContainerStatus("crasher")
		return c != nil && c.RestartCount >= 4 && c.State == runtime.ContainerStateExited
	})
	if !sawBackOff {
		t.Error("no sync reported CrashLoopBackOff")
	}
	// Restart gaps: immediate, then ~1s, ~2s, ~4s.
	var gaps []time.Duration
	for i := 1; i < len(starts); i++ {
		gaps = append(gaps, starts[i].Sub(starts[i-1]))
	}
	if len(gaps) < 4 || gaps[2] < 900*time.Millisecond || gaps[3] < gaps[2]+500*time.Millisecond {
		t.Errorf("gaps between starts %v, want them to grow with the back-off", gaps)
	}
	if c := e.status(pod).FindContainerStatus("crasher"); c.ExitCode != 3 || c.Reason != "Error" {
		t.Errorf("crasher exited %d (%s), want 3 (Error)", c.ExitCode, c.Reason)
	}
}

func TestRestartPoliciesOnContainerd(t *testing.T) {
	for _, tc := range []struct {
		policy       v1.RestartPolicy
		script       string
		wantRestarts bool
	}{
		{v1.RestartPolicyOnFailure, "exit 0", false},
		{v1.RestartPolicyOnFailure, "exit 1", true},
		{v1.RestartPolicyNever, "exit 1", false},
	} {
		t.Run(string(tc.policy)+"-"+strings.ReplaceAll(tc.script, " ", ""), func(t *testing.T) {
			e := newPodEnv(t, nil)
			pod := e.pod(tc.policy, sh("job", tc.script))
			e.syncUntil(pod, 30*time.Second, "exited", func(st *runtime.PodStatus, _ *runtime.SyncResult) bool {
				c := st.FindContainerStatus("job")
				return c != nil && c.State == runtime.ContainerStateExited
			})
			// Give restarts a chance (the first is immediate).
			for i := 0; i < 5; i++ {
				e.rt.SyncPod(e.ctx, pod, e.status(pod))
				time.Sleep(300 * time.Millisecond)
			}
			restarts := len(e.status(pod).ContainerStatusesByName("job")) > 1
			if restarts != tc.wantRestarts {
				t.Errorf("restarted: %v, want %v", restarts, tc.wantRestarts)
			}
		})
	}
}

func TestEnvExpansionAndRunAsUserOnContainerd(t *testing.T) {
	e := newPodEnv(t, nil)
	app := sh("app", sleepForever)
	app.Env = []v1.EnvVar{
		{Name: "BASE", Value: "node"},
		{Name: "FULL", Value: "$(BASE)kit-$(POD)"},
		{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "LITERAL", Value: "$$(BASE)"},
	}
	app.SecurityContext = &v1.SecurityContext{RunAsUser: ptr.To[int64](1234), RunAsGroup: ptr.To[int64](5678)}
	pod := e.pod(v1.RestartPolicyAlways, app)
	st := e.syncUntil(pod, 30*time.Second, "running", func(st *runtime.PodStatus, _ *runtime.SyncResult) bool {
		c := st.FindContainerStatus("app")
		return c != nil && c.State == runtime.ContainerStateRunning
	})
	id := st.FindContainerStatus("app").ID.ID
	client, _ := dialContainerd(t)
	out, _, err := client.ExecSync(e.ctx, id, []string{"env"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	env := string(out)
	// FULL refers to POD, defined after it, so $(POD) stays as written.
	for _, want := range []string{"FULL=nodekit-$(POD)", "LITERAL=$(BASE)", "POD=" + pod.Name} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("env in the container lacks %q:\n%s", want, env)
		}
	}
	out, _, err = client.ExecSync(e.ctx, id, []string{"id", "-u"}, 10*time.Second)
	if err != nil || strings.TrimSpace(string(out)) != "1234" {
		t.Errorf("id -u: %q %v, want 1234", out, err)
	}
	out, _, err = client.ExecSync(e.ctx, id, []string{"id", "-g"}, 10*time.Second)
	if err != nil || strings.TrimSpace(string(out)) != "5678" {
		t.Errorf("id -g: %q %v, want 5678", out, err)
	}
}

func TestPreStopAndGraceOnContainerd(t *testing.T) {
	work := t.TempDir()
	e := newPodEnv(t, hostDirs{"work": work})
	polite := sh("polite", sleepForever)
	polite.VolumeMounts = []v1.VolumeMount{{Name: "work", MountPath: "/work"}}
	polite.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo drained > /work/prestop"}}}}
	stubborn := sh("stubborn", "trap '' TERM; while true; do sleep 1; done")
	pod := e.pod(v1.RestartPolicyAlways, polite, stubborn)
	pod.Spec.Volumes = []v1.Volume{{Name: "work"}}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
	e.syncUntil(pod, 30*time.Second, "running", func(st *runtime.PodStatus, _ *runtime.SyncResult) bool {
		n := 0
		for _, c := range st.ContainerStatuses {
			if c.State == runtime.ContainerStateRunning {
				n++
			}
		}
		return n == 2
	})
	start := time.Now()
	if err := e.rt.KillPod(e.ctx, pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if data, _ := os.ReadFile(filepath.Join(work, "prestop")); string(data) != "drained\n" {
		t.Errorf("preStop left %q, want drained", data)
	}
	st := e.status(pod)
	if c := st.FindContainerStatus("stubborn"); c.ExitCode != 137 {
		t.Errorf("a container ignoring SIGTERM exited %d, want 137 (killed)", c.ExitCode)
	}
	if c := st.FindContainerStatus("polite"); c.ExitCode != 0 {
		t.Errorf("a container handling SIGTERM exited %d, want 0", c.ExitCode)
	}
	if took < 2500*time.Millisecond || took > 20*time.Second {
		t.Errorf("KillPod took %v, want about the 3 s grace period", took)
	}
}

func TestUnknownImageOnContainerd(t *testing.T) {
	e := newPodEnv(t, nil)
	// A registry on a closed loopback port: the pull fails at once and
	// no traffic leaves the machine.
	c := sh("app", sleepForever)
	c.Image = "127.0.0.1:1/nodekit/absent:1"
	pod := e.pod(v1.RestartPolicyAlways, c)
	var reasons []string
	e.syncUntil(pod, 30*time.Second, "backing off the pull", func(_ *runtime.PodStatus, res *runtime.SyncResult) bool {
		for _, s := range res.Steps {
			if s.Target == "app" && (len(reasons) == 0 || reasons[len(reasons)-1] != s.Reason) {
				reasons = append(reasons, s.Reason)
			}
		}
		return len(reasons) >= 3
	})
	want := []string{cri.ReasonErrImagePull, cri.ReasonImagePullBackOff, cri.ReasonErrImagePull}
	if strings.Join(reasons[:3], ",") != strings.Join(want, ",") {
		t.Errorf("reasons %v, want %v", reasons, want)
	}
}

func TestEtcHostsOnContainerd(t *testing.T) {
	// The kubelet's managed /etc/hosts, as the conformance suite checks
	// it: the pod's file in containers of the pod network, the node's
	// (with the hostAliases) on the host network, and a container's own
	// mount at /etc/hosts left alone.
	own := filepath.Join(t.TempDir(), "hosts")
	nodeHosts := filepath.Join(t.TempDir(), "node-hosts")
	for f, content := range map[string]string{own: "# the container's own\n", nodeHosts: "127.0.0.1\tlocalhost\n# the node's\n"} {
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := newPodEnv(t, hostDirs{"own": own}, func(c *cri.Config) { c.NodeHostsFile, c.ClusterDomain = nodeHosts, "cluster.local" })
	client, _ := dialContainerd(t)
	cat := func(st *runtime.PodStatus, container string) string {
		t.Helper()
		out, stderr, err := client.ExecSync(e.ctx, st.FindContainerStatus(container).ID.ID, []string{"cat", "/etc/hosts"}, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: cat /etc/hosts: %v %s", container, err, stderr)
		}
		return string(out)
	}
	running := func(names ...string) func(*runtime.PodStatus, *runtime.SyncResult) bool {
		return func(st *runtime.PodStatus, _ *runtime.SyncResult) bool {
			for _, n := range names {
				if c := st.FindContainerStatus(n); c == nil || c.State != runtime.ContainerStateRunning {
					return false
				}
			}
			return true
		}
	}
	aliases := []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}}

	pod := e.pod(v1.RestartPolicyAlways, sh("managed", sleepForever), sh("mounts-its-own", sleepForever))
	pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.HostAliases = "web", "svc1", aliases
	pod.Spec.Volumes = []v1.Volume{{Name: "own"}}
	pod.Spec.Containers[1].VolumeMounts = []v1.VolumeMount{{Name: "own", MountPath: "/etc/hosts"}}
	st := e.syncUntil(pod, 60*time.Second, "running", running("managed", "mounts-its-own"))
	ip := st.SandboxStatuses[0].IPs[0]
	got := cat(st, "managed")
	for _, want := range []string{"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n",
		"\n" + ip + "\tweb.svc1.e2e.svc.cluster.local\tweb\n",
		"\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("managed: /etc/hosts lacks %q:\n%s", want, got)
		}
	}
	if got := cat(st, "mounts-its-own"); got != "# the container's own\n" {
		t.Errorf("mounts-its-own: /etc/hosts is %q, want its own file", got)
	}

	hostPod := e.pod(v1.RestartPolicyAlways, sh("host", sleepForever))
	hostPod.Spec.HostNetwork, hostPod.Spec.HostAliases = true, aliases
	st = e.syncUntil(hostPod, 60*time.Second, "running", running("host"))
	want := "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n# the node's\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"
	if got := cat(st, "host"); got != want {
		t.Errorf("host network: /etc/hosts is %q, want %q", got, want)
	}
}
