package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
)

// TestNodeServerOnContainerd reads a container's log, runs an exec with
// stdin through containerd's streaming server, and reads the stats
// summary, all through the agent's node server.
func TestNodeServerOnContainerd(t *testing.T) {
	client, image := dialContainerd(t)
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: talk}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; echo hello; echo world; while true; do sleep 1; done"]
`, image)
	if err := os.WriteFile(filepath.Join(manifests, "talk.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	node := "e2e-server"
	src, err := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName: node, NodeIPs: []string{"127.0.0.1"}, RuntimeService: client, ImageService: client,
		Sources: []podsource.Source{src},
		CRI:     cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	ts := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		ts.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		removePodsOf(t, client, node)
	})

	var pod *v1.Pod
	deadline := time.Now().Add(60 * time.Second)
	for pod == nil || pod.Status.Phase != v1.PodRunning {
		if time.Now().After(deadline) {
			t.Fatal("talk is not Running within 60s")
		}
		time.Sleep(200 * time.Millisecond)
		pod = nil
		for _, p := range a.Pods() {
			if p.Name == "talk-"+node {
				pod = p
			}
		}
	}
	client20 := &http.Client{Timeout: 20 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client20.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	logPath := "/containerLogs/" + pod.Namespace + "/" + pod.Name + "/app"
	var code int
	var body string
	for range 50 { // the shell may not have written both lines yet
		if code, body = get(logPath); body == "hello\nworld\n" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != 200 || body != "hello\nworld\n" {
		t.Errorf("container log: %d %q", code, body)
	}
	if code, body = get(logPath + "?tailLines=1&timestamps=true"); code != 200 || !strings.HasSuffix(body, " world\n") || strings.Contains(body, "hello") {
		t.Errorf("the last line with its time: %d %q", code, body)
	}

	u, _ := url.Parse(ts.URL + "/exec/" + pod.Namespace + "/" + pod.Name + "/app?command=cat&input=1&output=1")
	exec, err := remotecommand.NewSPDYExecutor(&restclient.Config{Host: ts.URL}, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ecancel()
	var out bytes.Buffer
	if err := exec.StreamWithContext(ectx, remotecommand.StreamOptions{Stdin: strings.NewReader("through containerd\n"), Stdout: &out}); err != nil || out.String() != "through containerd\n" {
		t.Errorf("exec cat: %v, stdout %q", err, out.String())
	}

	if code, body = get("/stats/summary"); code != 200 || !strings.Contains(body, `"name":"`+pod.Name+`"`) || !strings.Contains(body, `"workingSetBytes"`) {
		t.Errorf("/stats/summary: %d %.500s", code, body)
	}
}
