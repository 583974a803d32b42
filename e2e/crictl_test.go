package e2e_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCrictlAgainstFakecri builds examples/fakecri, serves it on a
// socket, and drives a whole pod lifecycle through crictl, the reference
// CRI command-line client.
func TestCrictlAgainstFakecri(t *testing.T) {
	crictl := env(t, "NODEKIT_CRICTL")
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakecri")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/fakecri").CombinedOutput(); err != nil {
		t.Fatalf("build examples/fakecri: %v\n%s", err, out)
	}
	endpoint := "unix://" + filepath.Join(dir, "fakecri.sock")
	server := exec.Command(bin, "--listen", endpoint)
	var serverOut strings.Builder
	server.Stdout, server.Stderr = &serverOut, &serverOut
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- server.Wait() }()
	t.Cleanup(func() {
		// The server must exit cleanly, and promptly, on SIGINT.
		_ = server.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("fakecri server exited with %v\n%s", err, serverOut.String())
			}
		case <-time.After(10 * time.Second):
			_ = server.Process.Kill()
			<-exited
			t.Errorf("fakecri server did not exit within 10s of SIGINT")
		}
	})

	run := func(args ...string) string {
		t.Helper()
		full := append([]string{"--runtime-endpoint", endpoint, "--image-endpoint", endpoint, "--timeout", "10s"}, args...)
		var out []byte
		var stderr strings.Builder
		var err error
		// The server needs a moment to listen; retry a call that could
		// not connect a bounded number of times.
		for i := 0; i < 50; i++ {
			stderr.Reset()
			cmd := exec.Command(crictl, full...)
			cmd.Stderr = &stderr
			out, err = cmd.Output()
			if err == nil || !strings.Contains(stderr.String(), "connect") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("crictl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}

	logDir := filepath.Join(dir, "logs")
	pod := writeJSON(t, dir, "pod.json", map[string]any{
		"metadata":      map[string]any{"name": "crictl-pod", "namespace": "default", "uid": "crictl-uid-1"},
		"log_directory": logDir,
		"linux":         map[string]any{},
	})
	ctr := writeJSON(t, dir, "container.json", map[string]any{
		"metadata": map[string]any{"name": "app"},
		"image":    map[string]any{"image": "busybox:1.36"},
		"command":  []string{"sh", "-c", "echo hello from app; sleep 3600"},
		"log_path": "app/0.log",
		"envs": []map[string]any{
			{"key": "FAKECRI_LOG", "value": "hello from app"},
			{"key": "GREETING", "value": "hi"},
		},
		"linux": map[string]any{},
	})

	run("pull", "busybox:1.36")
	if out := run("images", "-o", "json"); !strings.Contains(out, "docker.io/library/busybox:1.36") {
		t.Errorf("crictl images does not list the pulled image:\n%s", out)
	}
	podID := run("runp", pod)
	if len(podID) != 64 {
		t.Fatalf("runp printed %q, want a 64-digit sandbox ID", podID)
	}
	if out := run("pods", "-q"); !strings.Contains(out, podID) {
		t.Errorf("crictl pods does not list %s:\n%s", podID, out)
	}
	ctrID := run("create", podID, ctr, pod)
	run("start", ctrID)

	ps := run("ps", "-a", "-o", "json")
	var list struct {
		Containers []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"containers"`
	}
	if err := json.Unmarshal([]byte(ps), &list); err != nil {
		t.Fatalf("crictl ps -o json: %v\n%s", err, ps)
	}
	if len(list.Containers) != 1 || list.Containers[0].ID != ctrID || list.Containers[0].State != "CONTAINER_RUNNING" {
		t.Errorf("crictl ps: %+v, want %s running", list.Containers, ctrID)
	}

	var inspect struct {
		Status struct {
			State    string `json:"state"`
			LogPath  string `json:"logPath"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(run("inspect", ctrID)), &inspect); err != nil {
		t.Fatalf("crictl inspect: %v", err)
	}
	if inspect.Status.State != "CONTAINER_RUNNING" || inspect.Status.Metadata.Name != "app" || inspect.Status.LogPath != filepath.Join(logDir, "app/0.log") {
		t.Errorf("crictl inspect: %+v", inspect.Status)
	}

	if out := run("exec", "-s", ctrID, "echo", "exec", "works"); out != "exec works" {
		t.Errorf("crictl exec -s echo: %q, want %q", out, "exec works")
	}
	if out := run("exec", "-s", ctrID, "env"); !strings.Contains(out, "GREETING=hi") {
		t.Errorf("crictl exec -s env: %q, want GREETING=hi", out)
	}
	if out := run("logs", ctrID); out != "hello from app" {
		t.Errorf("crictl logs: %q, want %q", out, "hello from app")
	}

	run("stop", ctrID)
	run("stop", ctrID) // idempotent
	if out := run("ps", "-a", "-q", "--state", "exited"); out != ctrID {
		t.Errorf("crictl ps --state exited: %q, want %s", out, ctrID)
	}
	run("rm", ctrID)
	if out := run("ps", "-a", "-q"); out != "" {
		t.Errorf("crictl ps after rm: %q, want nothing", out)
	}
	run("stopp", podID)
	run("rmp", podID)
	if out := run("pods", "-q"); out != "" {
		t.Errorf("crictl pods after rmp: %q, want nothing", out)
	}
	run("rmi", "busybox:1.36")
	if out := run("images", "-q"); out != "" {
		t.Errorf("crictl images after rmi: %q, want nothing", out)
	}
}

func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
