package agent_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// The agent's Handler serves a running pod's container log, and an exec
// with stdin through the runtime's streaming server.
func TestAgentServesLogsAndExec(t *testing.T) {
	fake := newFake(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	streamer, err := fake.NewStreamingServer(lis)
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	sdone := make(chan error, 1)
	go func() { sdone <- streamer.Run(sctx) }()
	defer func() {
		scancel()
		if err := <-sdone; err != nil {
			t.Errorf("streaming server: %v", err)
		}
	}()

	dir := manifestDir(t)
	writeManifest(t, dir, "web", "Always", "FAKECRI_LOG", "hello\nworld")
	r := start(t, fake, dir)
	eventually(t, "web runs", func() bool { return r.phase("web") == v1.PodRunning })
	pod := r.pod("web")
	ts := httptest.NewServer(r.a.Handler())
	defer ts.Close()

	resp, err := http.Get(ts.URL + "/containerLogs/" + pod.Namespace + "/" + pod.Name + "/main")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(resp); resp.StatusCode != 200 || body != "hello\nworld\n" {
		t.Errorf("container log: %d %q", resp.StatusCode, body)
	}
	resp, err = http.Get(ts.URL + "/containerLogs/" + pod.Namespace + "/nope/main")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(resp); resp.StatusCode != 404 || !strings.Contains(body, `pod "nope" does not exist`) {
		t.Errorf("log of an unknown pod: %d %q", resp.StatusCode, body)
	}

	resp, err = http.Get(ts.URL + "/stats/summary")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(resp); resp.StatusCode != 200 || !strings.Contains(body, `"podRef":{"name":"`+pod.Name+`"`) {
		t.Errorf("/stats/summary: %d %q, want the pod", resp.StatusCode, body)
	}

	u, _ := url.Parse(ts.URL + "/exec/" + pod.Namespace + "/" + pod.Name + "/main?command=cat&input=1&output=1")
	exec, err := remotecommand.NewSPDYExecutor(&restclient.Config{Host: ts.URL}, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("via the agent\n"), Stdout: &out}); err != nil || out.String() != "via the agent\n" {
		t.Errorf("exec cat: %v, stdout %q", err, out.String())
	}
	ts.Close()
	r.stop()
}
