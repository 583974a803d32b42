package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// running is an agent on a fakecri runtime, reading a manifest directory.
type running struct {
	t      *testing.T
	a      *agent.Agent
	fake   *fakecri.Runtime
	dir    string
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, fake *fakecri.Runtime, dir string) *running {
	t.Helper()
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "node", Period: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{src},
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "..", "logs"), PodsDir: filepath.Join(dir, "..", "pods"), ResolvConf: "-",
			CrashLoopBackOff: cri.BackOff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: t, a: a, fake: fake, dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		r.t.Errorf("agent: %v", err)
	}
}

func newFake(t *testing.T) *fakecri.Runtime {
	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.88.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	return fake
}

func manifestDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeManifest(t *testing.T, dir, name, policy string, env ...string) {
	t.Helper()
	var envs []string
	for i := 0; i < len(env); i += 2 {
		envs = append(envs, fmt.Sprintf("{name: %s, value: %q}", env[i], env[i+1]))
	}
	doc := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: busybox:1.36
    env: [%s]
`, name, policy, strings.Join(envs, ", "))
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond every 10ms for up to 20s of wall time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyShowing(t, what, cond, func() string { return "" })
}

// eventuallyShowing is eventually; a timeout also reports describe().
func eventuallyShowing(t *testing.T, what string, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s\n%s", what, describe())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *running) pod(name string) *v1.Pod {
	for _, p := range r.a.Pods() {
		if p.Name == name+"-node" {
			return p
		}
	}
	return nil
}

func (r *running) phase(name string) v1.PodPhase {
	if p := r.pod(name); p != nil {
		return p.Status.Phase
	}
	return ""
}

func countCalls(fake *fakecri.Runtime, method string) int {
	n := 0
	for _, c := range fake.Calls() {
		if c == method {
			n++
		}
	}
	return n
}

func Test100StaticPodsReachRunning(t *testing.T) {
	dir := manifestDir(t)
	for i := 0; i < 100; i++ {
		writeManifest(t, dir, fmt.Sprintf("pod-%03d", i), "Always")
	}
	r := start(t, newFake(t), dir)
	eventually(t, "100 pods are Running", func() bool {
		pods := r.a.Pods()
		n := 0
		for _, p := range pods {
			if p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready {
				n++
			}
		}
		return n == 100
	})
	if got := countCalls(r.fake, "RunPodSandbox"); got != 100 {
		t.Errorf("%d sandboxes for 100 pods", got)
	}
}

func TestManifestEditRestartsThePodWithTheNewSpec(t *testing.T) {
	dir := manifestDir(t)
	writeManifest(t, dir, "web", "Always", "VERSION", "1")
	r := start(t, newFake(t), dir)
	eventually(t, "web runs", func() bool { return r.phase("web") == v1.PodRunning })
	oldUID := r.pod("web").UID

	writeManifest(t, dir, "web", "Always", "VERSION", "2")
	eventually(t, "the new web runs", func() bool {
		p := r.pod("web")
		return p != nil && p.UID != oldUID && p.Status.Phase == v1.PodRunning
	})
	newPod := r.pod("web")
	if newPod.Spec.Containers[0].Env[0].Value != "2" {
		t.Errorf("running spec has VERSION=%s", newPod.Spec.Containers[0].Env[0].Value)
	}
	// The old pod's sandbox was stopped.
	eventually(t, "the old sandbox stops", func() bool {
		list, _ := r.fake.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(oldUID)}})
		for _, s := range list {
			if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
				return false
			}
		}
		return true
	})
	if len(r.a.Pods()) != 1 {
		t.Errorf("/pods lists %d pods, want the new web only", len(r.a.Pods()))
	}
}

func TestRemovedManifestTerminatesThePod(t *testing.T) {
	dir := manifestDir(t)
	writeManifest(t, dir, "web", "Always", fakecri.EnvStopDelay, "1s")
	r := start(t, newFake(t), dir)
	eventually(t, "web runs", func() bool { return r.phase("web") == v1.PodRunning })
	uid := r.pod("web").UID
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, "web's containers stop", func() bool {
		list, _ := r.fake.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{cri.LabelPodUID: string(uid)},
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		})
		return len(list) == 0
	})
	if took := time.Since(start); took > 5*time.Second+2*time.Second {
		t.Errorf("termination took %v, beyond the 5s grace period", took)
	}
	eventually(t, "web leaves /pods", func() bool { return r.pod("web") == nil })
}

// A manifest removed and put back while its pod terminates has the same
// UID: the pod finishes terminating, then starts afresh.
func TestManifestPutBackWhileTerminatingStartsThePodAgain(t *testing.T) {
	dir := manifestDir(t)
	writeManifest(t, dir, "web", "Always", fakecri.EnvStopDelay, "1s")
	manifest, err := os.ReadFile(filepath.Join(dir, "web.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, newFake(t), dir)
	eventually(t, "web runs", func() bool { return r.phase("web") == v1.PodRunning })
	uid := r.pod("web").UID
	first := r.pod("web").Status.ContainerStatuses[0].ContainerID
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web is being stopped", func() bool { return countCalls(r.fake, "StopContainer") > 0 })
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web runs again in a new container", func() bool {
		p := r.pod("web")
		return p != nil && p.UID == uid && p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].ContainerID != first && p.Status.ContainerStatuses[0].Ready
	})
}

func TestCrashLoopBackOffShowsInPods(t *testing.T) {
	dir := manifestDir(t)
	writeManifest(t, dir, "crasher", "Always", fakecri.EnvExitCode, "1")
	r := start(t, newFake(t), dir)
	srv := httptest.NewServer(r.a.Handler())
	defer srv.Close()
	eventually(t, "/pods shows CrashLoopBackOff", func() bool {
		resp, err := http.Get(srv.URL + "/pods")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list v1.PodList
		if json.NewDecoder(resp.Body).Decode(&list) != nil || len(list.Items) != 1 {
			return false
		}
		c := list.Items[0].Status.ContainerStatuses
		return len(c) == 1 && c[0].State.Waiting != nil && c[0].State.Waiting.Reason == "CrashLoopBackOff" &&
			c[0].LastTerminationState.Terminated != nil && c[0].LastTerminationState.Terminated.ExitCode == 1 &&
			c[0].RestartCount >= 1 && list.Items[0].Status.Phase == v1.PodRunning
	})
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}
	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	_, _ = fmt.Fprint(&body, readAll(resp))
	for _, m := range []string{"kubelet_pleg_relist_duration_seconds", "kubelet_running_pods", "kubelet_pod_start_duration_seconds", `kubelet_terminated_containers_total{container_type="container",exit_code="1",reason="Error"}`} {
		if !strings.Contains(body.String(), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

func readAll(resp *http.Response) string {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

func TestNewAgentAdoptsRunningContainers(t *testing.T) {
	dir := manifestDir(t)
	for i := 0; i < 5; i++ {
		writeManifest(t, dir, fmt.Sprintf("web-%d", i), "Always")
	}
	fake := newFake(t)
	r1 := start(t, fake, dir)
	eventually(t, "5 pods run", func() bool {
		n := 0
		for _, p := range r1.a.Pods() {
			if p.Status.Phase == v1.PodRunning {
				n++
			}
		}
		return n == 5
	})
	r1.stop()
	fake.ResetCalls()

	r2 := start(t, fake, dir)
	eventuallyShowing(t, "the new agent reports 5 running pods", func() bool {
		n := 0
		for _, p := range r2.a.Pods() {
			if p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == 0 {
				n++
			}
		}
		return n == 5
	}, func() string {
		var seen []string
		for _, p := range r2.a.Pods() {
			seen = append(seen, fmt.Sprintf("%s %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses))
		}
		return strings.Join(seen, "\n") + fmt.Sprintf("\nruntime calls: %v", fake.Calls())
	})
	for _, m := range []string{"RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer", "StopPodSandbox"} {
		if n := countCalls(fake, m); n != 0 {
			t.Errorf("the new agent called %s %d times, want 0", m, n)
		}
	}
}

func TestOrphansAreKilled(t *testing.T) {
	dir := manifestDir(t)
	writeManifest(t, dir, "keep", "Always")
	writeManifest(t, dir, "drop", "Always")
	fake := newFake(t)
	r1 := start(t, fake, dir)
	eventually(t, "both run", func() bool { return r1.phase("keep") == v1.PodRunning && r1.phase("drop") == v1.PodRunning })
	dropUID := r1.pod("drop").UID
	r1.stop()
	// The manifest goes while no agent runs: the next one finds an orphan.
	os.Remove(filepath.Join(dir, "drop.yaml"))
	r2 := start(t, fake, dir)
	eventually(t, "the orphan is stopped", func() bool {
		list, _ := fake.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{cri.LabelPodUID: string(dropUID)},
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		})
		return len(list) == 0
	})
	if r2.phase("keep") != v1.PodRunning {
		t.Error("the wanted pod is not running")
	}
}

func TestHealthzReportsAnUnreadyRuntime(t *testing.T) {
	dir := manifestDir(t)
	fake := newFake(t)
	fake.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni config uninitialized")
	r := start(t, fake, dir)
	srv := httptest.NewServer(r.a.Handler())
	defer srv.Close()
	var body string
	eventually(t, "/healthz fails with the runtime's reason", func() bool {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body = readAll(resp)
		return resp.StatusCode == http.StatusInternalServerError && strings.Contains(body, "NetworkPluginNotReady")
	})
	if err := r.a.Healthy(); err == nil {
		t.Error("Healthy() is nil while the network is not ready")
	}
}
