package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fakecri"
	"github.com/nodekit/nodekit/server"
)

// streamingNode runs fakecri with its streaming server, one pod ns/web
// with a running container "app", and the node server over them. It
// returns the server's URL and a func that stops fakecri's streaming
// server.
func streamingNode(t *testing.T, behavior fakecri.Behavior) (string, func()) {
	t.Helper()
	srv, stop := streamingServer(t, behavior, nil)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL, stop
}

// streamingServer is streamingNode's server, not yet served.
// with, when not nil, adds to the server's Config.
func streamingServer(t *testing.T, behavior fakecri.Behavior, with func(*server.Config)) (*server.Server, func()) {
	t.Helper()
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	streamer, err := fake.NewStreamingServer(lis)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- streamer.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("streaming server: %v", err)
			}
		}
	}
	t.Cleanup(stop)

	bg := context.Background()
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns", Uid: "uid-1"}}
	sb, err := fake.RunPodSandbox(bg, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.PullImage(bg, &runtimeapi.ImageSpec{Image: "busybox"}, nil, sbCfg); err != nil {
		t.Fatal(err)
	}
	fake.Script(fakecri.Match{Container: "app"}, behavior)
	id, err := fake.CreateContainer(bg, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.StartContainer(bg, id); err != nil {
		t.Fatal(err)
	}
	node := newFakeNode()
	node.addPod("ns", "web", "uid-1", &runtime.ContainerStatus{ID: runtime.ContainerID{Type: "fake", ID: id}, Name: "app", State: runtime.ContainerStateRunning})
	node.statuses["uid-1"].SandboxStatuses[0].ID = sb
	cfg := server.Config{NodeName: "node-1", Pods: node, Runtime: node, Streaming: fake}
	if with != nil {
		with(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, stop
}

func execute(ctx context.Context, t *testing.T, base, path string, opts remotecommand.StreamOptions) error {
	t.Helper()
	u, err := url.Parse(base + path)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := remotecommand.NewSPDYExecutor(&restclient.Config{Host: base}, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	return exec.StreamWithContext(ctx, opts)
}

// An exec with stdin goes through the node server to fakecri and back.
func TestExecWithStdin(t *testing.T) {
	base, _ := streamingNode(t, fakecri.Behavior{Exec: map[string]fakecri.ExecResult{
		"fail": {ExitCode: 3, Stdout: "out\n", Stderr: "err\n"},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := execute(ctx, t, base, "/exec/ns/web/app?command=cat&input=1&output=1", remotecommand.StreamOptions{
		Stdin: strings.NewReader("hello through the node\n"), Stdout: &out,
	})
	if err != nil || out.String() != "hello through the node\n" {
		t.Errorf("exec cat: %v, stdout %q", err, out.String())
	}
	var stdout, stderr bytes.Buffer
	err = execute(ctx, t, base, "/exec/ns/web/app?command=fail&output=1&error=1", remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	var exitErr utilexec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 3 || stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("exec fail: %v, stdout %q, stderr %q; want exit 3, out, err", err, stdout.String(), stderr.String())
	}
	var attached bytes.Buffer
	err = execute(ctx, t, base, "/attach/ns/web/app?input=1&output=1", remotecommand.StreamOptions{
		Stdin: strings.NewReader("console\n"), Stdout: &attached,
	})
	if err != nil || attached.String() != "console\n" {
		t.Errorf("attach: %v, stdout %q", err, attached.String())
	}
}

// A stream the runtime drops ends for the client.
func TestExecStreamDroppedByTheRuntime(t *testing.T) {
	base, stopRuntime := streamingNode(t, fakecri.Behavior{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stdin, stdinW := io.Pipe() // never closed by the client
	defer stdinW.Close()
	out := &notifyingBuffer{wrote: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, t, base, "/exec/ns/web/app?command=cat&input=1&output=1", remotecommand.StreamOptions{Stdin: stdin, Stdout: out})
	}()
	if _, err := io.WriteString(stdinW, "ping\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-out.wrote:
	case <-ctx.Done():
		t.Fatal("no echo within 20s")
	}
	stopRuntime()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the client's stream did not end within 20s of the runtime dropping it")
	}
	_ = stdinW.Close()
}

// notifyingBuffer signals each write; it has no ReadFrom, so that io.Copy
// writes through Write.
type notifyingBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (b *notifyingBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	n, err := b.buf.Write(p)
	b.mu.Unlock()
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func TestStreamingBadRequests(t *testing.T) {
	base, _ := streamingNode(t, fakecri.Behavior{})
	for _, tc := range []struct {
		path string
		code int
		msg  string
	}{
		{"/exec/ns/nope/app?command=ls&output=1", 404, "pod does not exist"},
		{"/exec/ns/web/other-uid/app?command=ls&output=1", 404, "pod not found"},
		{"/exec/ns/web/nope?command=ls&output=1", 404, `container not found ("nope")`},
		{"/exec/ns/web/app?command=ls", 400, "you must specify at least 1 of stdin, stdout, stderr"},
		{"/exec/ns/web/app?output=1", 400, "no command"},
		{"/attach/ns/nope/app?output=1", 404, "pod does not exist"},
		{"/portForward/ns/nope", 404, "pod does not exist"},
	} {
		resp, err := http.Post(base+tc.path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.msg) {
			t.Errorf("POST %s: %d %q, want %d %q", tc.path, resp.StatusCode, b, tc.code, tc.msg)
		}
	}
}

// A port-forward through the node server reaches fakecri's echo on the
// pod's port.
func TestPortForward(t *testing.T) {
	base, _ := streamingNode(t, fakecri.Behavior{})
	u, err := url.Parse(base + "/portForward/ns/web")
	if err != nil {
		t.Fatal(err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(&restclient.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("ForwardPorts: %v", err)
		}
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ForwardPorts: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the forward was not ready within 20s")
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 || ports[0].Remote != 8080 {
		t.Fatalf("ports %v, %v", ports, err)
	}
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, "ping"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "ping" {
		t.Errorf("echo through the forward: %q, %v", got, err)
	}
}

// When Serve's context ends, a session in progress is cut (the client
// sees its stream end) and Serve returns only once its handler has.
func TestServeEndsStreamingSessions(t *testing.T) {
	srv, _ := streamingServer(t, fakecri.Behavior{}, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, lis, nil) }()
	base := "http://" + lis.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stdin, stdinW := io.Pipe()
	defer stdinW.Close()
	out := &notifyingBuffer{wrote: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, t, base, "/exec/ns/web/app?command=cat&input=1&output=1", remotecommand.StreamOptions{Stdin: stdin, Stdout: out})
	}()
	if _, err := io.WriteString(stdinW, "ping\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-out.wrote:
	case <-ctx.Done():
		t.Fatal("no echo within 20s")
	}
	scancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not return within 20s of its context ending")
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the client's stream did not end within 20s of the server stopping")
	}
	_ = stdinW.Close()
}
