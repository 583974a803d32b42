package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/syncbuf"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// TestStandaloneAgentOnContainerd runs examples/standalone against the
// e2e containerd with the sample manifests and reads /pods until the
// long-running pods are Running and the jobs have Succeeded and Failed.
func TestStandaloneAgentOnContainerd(t *testing.T) {
	endpoint := env(t, "NODEKIT_E2E_ENDPOINT")
	client, _ := dialContainerd(t) // closed after the cleanup below has used it
	dir := t.TempDir()
	bin := filepath.Join(dir, "standalone")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/standalone").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	node := "e2e-standalone"
	cmd := exec.Command(bin, "--runtime-endpoint", endpoint, "--manifests", "../examples/standalone/manifests",
		"--listen", addr, "--node-name", node, "--pod-logs-dir", filepath.Join(dir, "logs"), "--pods-dir", filepath.Join(dir, "pods"), "--quiet")
	stdout, _ := cmd.StdoutPipe()
	var stderr syncbuf.Buffer // written by the command's copier while read here
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case err := <-waited:
			if err != nil {
				t.Errorf("standalone exited with %v\n%s", err, stderr.String())
			}
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("standalone did not exit on SIGINT")
		}
		removeNodePods(t, client, node)
	})

	want := map[string]v1.PodPhase{
		"web-" + node: v1.PodRunning, "init-then-app-" + node: v1.PodRunning,
		"job-succeeds-" + node: v1.PodSucceeded, "job-fails-" + node: v1.PodFailed,
	}
	var last map[string]v1.PodPhase
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		last = phases(addr)
		if equalPhases(last, want) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !equalPhases(last, want) {
		t.Fatalf("phases %v, want %v\nagent log:\n%s", last, want, tail(stderr.String(), 30))
	}
	// web's exec readiness probe (cat /www/index.html) makes it Ready.
	deadline = time.Now().Add(30 * time.Second)
	for !webReady(addr, "web-"+node) {
		if time.Now().After(deadline) {
			t.Fatalf("web is not Ready\nagent log:\n%s", tail(stderr.String(), 30))
		}
		time.Sleep(300 * time.Millisecond)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}
	var out []string
	for l := range drain(lines) {
		out = append(out, l)
	}
	if !strings.Contains(strings.Join(out, "\n"), "runtime: containerd") {
		t.Errorf("standalone output does not name the runtime:\n%s", strings.Join(out, "\n"))
	}
}

func drain(ch chan string) chan string {
	out := make(chan string, 100)
	go func() {
		defer close(out)
		for {
			select {
			case l, ok := <-ch:
				if !ok {
					return
				}
				out <- l
			case <-time.After(100 * time.Millisecond):
				return
			}
		}
	}()
	return out
}

func phases(addr string) map[string]v1.PodPhase {
	resp, err := http.Get("http://" + addr + "/pods")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil
	}
	out := map[string]v1.PodPhase{}
	for _, p := range list.Items {
		out[p.Name] = p.Status.Phase
	}
	return out
}

func webReady(addr, name string) bool {
	resp, err := http.Get("http://" + addr + "/pods")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var list v1.PodList
	if json.NewDecoder(resp.Body).Decode(&list) != nil {
		return false
	}
	for _, p := range list.Items {
		for _, c := range p.Status.Conditions {
			if p.Name == name && c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

func equalPhases(a, b map[string]v1.PodPhase) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// removeNodePods checks that the agent left the long-running pods'
// sandboxes ready, as it should on exit, and removes the node's pods.
func removeNodePods(t *testing.T, c *criclient.Client, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := c.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		t.Error(err)
		return
	}
	left := 0
	for _, s := range list {
		name := s.GetMetadata().GetName()
		if strings.HasSuffix(name, "-"+node) && (strings.HasPrefix(name, "web-") || strings.HasPrefix(name, "init-then-app-")) {
			left++
		}
	}
	if left != 2 {
		t.Errorf("%d of the 2 long-running pods' sandboxes are ready after the agent exited, want both left running", left)
	}
	removePodsOf(t, c, node)
}
