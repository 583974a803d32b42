package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// criLines renders CRI log lines: each entry is "<offset seconds> <stream> <tag> <content>".
func criLine(sec int, stream, tag, content string) string {
	return t0.Add(time.Duration(sec)*time.Second).Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + content + "\n"
}

// logServer serves a node whose pod ns/web has container "app": its
// current instance logs to cur (in state), its previous one to prev.
func logServer(t *testing.T, clk *clocktesting.FakeClock, state runtime.ContainerState, cur, prev string) (*httptest.Server, *fakeNode, string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	node := newFakeNode()
	node.addPod("ns", "web", "uid-1",
		&runtime.ContainerStatus{ID: runtime.ContainerID{Type: "fake", ID: "c1"}, Name: "app", State: state, LogPath: write("1.log", cur), StartedAt: t0},
		&runtime.ContainerStatus{ID: runtime.ContainerID{Type: "fake", ID: "c0"}, Name: "app", State: runtime.ContainerStateExited, LogPath: write("0.log", prev), StartedAt: t0},
	)
	srv, err := server.New(server.Config{Pods: node, Runtime: node, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, node, filepath.Join(dir, "1.log")
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestContainerLogs(t *testing.T) {
	cur := criLine(0, "stdout", "F", "one") +
		criLine(1, "stderr", "F", "two") +
		criLine(2, "stdout", "P", "thr") +
		criLine(2, "stdout", "P", "e") +
		criLine(3, "stdout", "F", "e") +
		"garbage that is not a CRI line\n" +
		criLine(4, "stdout", "F", "") +
		criLine(5, "stdout", "F", "five and some")
	prev := criLine(-10, "stdout", "F", "before the restart")
	clk := clocktesting.NewFakeClock(t0.Add(10 * time.Second))
	ts, _, _ := logServer(t, clk, runtime.ContainerStateRunning, cur, prev)
	stamp := func(sec int) string { return t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339Nano) }
	for _, tc := range []struct {
		query string
		want  string
	}{
		{"", "one\ntwo\nthree\n\nfive and some\n"},
		{"?timestamps=true", stamp(0) + " one\n" + stamp(1) + " two\n" + stamp(2) + " three\n" + stamp(4) + " \n" + stamp(5) + " five and some\n"},
		{"?tailLines=2", "\nfive and some\n"},
		{"?tail=2", "\nfive and some\n"},
		{"?tail=all", "one\ntwo\nthree\n\nfive and some\n"},
		{"?tailLines=0", ""},
		{"?tailLines=100", "one\ntwo\nthree\n\nfive and some\n"},
		{"?limitBytes=6", "one\ntw"},
		{"?limitBytes=9&tailLines=1", "five and "},
		{"?sinceTime=" + stamp(4), "\nfive and some\n"},
		{"?sinceSeconds=6", "\nfive and some\n"}, // now is t0+10s
		{"?previous=true", "before the restart\n"},
	} {
		code, body := get(t, ts.URL+"/containerLogs/ns/web/app"+tc.query)
		if code != http.StatusOK || body != tc.want {
			t.Errorf("GET %s: %d %q, want 200 %q", tc.query, code, body, tc.want)
		}
	}
}

func TestContainerLogsBadRequests(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	ts, _, _ := logServer(t, clk, runtime.ContainerStateRunning, criLine(0, "stdout", "F", "x"), "")
	for _, tc := range []struct {
		path string
		code int
		msg  string
	}{
		{"/containerLogs/ns/nope/app", 404, `pod "nope" does not exist`},
		{"/containerLogs/other/web/app", 404, `pod "web" does not exist`},
		{"/containerLogs/ns/web/nope", 404, `container "nope" not found in pod "web"`},
		{"/containerLogs/ns/web/app?tailLines=x", 400, "tailLines"},
		{"/containerLogs/ns/web/app?tailLines=-1", 422, "tailLines"},
		{"/containerLogs/ns/web/app?limitBytes=0", 422, "limitBytes"},
		{"/containerLogs/ns/web/app?sinceSeconds=1&sinceTime=" + t0.Format(time.RFC3339), 422, "sinceSeconds and sinceTime"},
		{"/containerLogs/ns/web/app?follow=maybe", 400, "follow"},
		{"/containerLogs/ns/web/app?stream=Stdout", 400, `unable to return the given log stream: "Stdout"`},
	} {
		code, body := get(t, ts.URL+tc.path)
		if code != tc.code || !strings.Contains(body, tc.msg) {
			t.Errorf("GET %s: %d %q, want %d with %q", tc.path, code, body, tc.code, tc.msg)
		}
	}
}

func TestContainerLogsPreviousWithoutOne(t *testing.T) {
	node := newFakeNode()
	dir := t.TempDir()
	p := filepath.Join(dir, "0.log")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	node.addPod("ns", "web", "uid-1", &runtime.ContainerStatus{ID: runtime.ContainerID{ID: "c"}, Name: "app", State: runtime.ContainerStateRunning, LogPath: p})
	node.addPod("ns", "new", "uid-2")
	srv, err := server.New(server.Config{Pods: node, Runtime: node})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	if code, body := get(t, ts.URL+"/containerLogs/ns/web/app?previous=true"); code != 400 || !strings.Contains(body, `previous terminated container "app" in pod "web" not found`) {
		t.Errorf("previous of a first instance: %d %q", code, body)
	}
	if code, body := get(t, ts.URL+"/containerLogs/ns/new/app"); code != 400 || !strings.Contains(body, `container "app" in pod "new" is waiting to start`) {
		t.Errorf("a container that never started: %d %q", code, body)
	}
}

// lineReader reads a followed log line by line, each read bounded in
// wall time.
type lineReader struct {
	t     *testing.T
	lines chan string
	done  chan error
}

func follow(t *testing.T, ctx context.Context, url string) *lineReader {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	lr := &lineReader{t: t, lines: make(chan string, 100), done: make(chan error, 1)}
	go func() {
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				lr.done <- err
				return
			}
			lr.lines <- l
		}
	}()
	return lr
}

func (lr *lineReader) next() string {
	lr.t.Helper()
	select {
	case l := <-lr.lines:
		return l
	case err := <-lr.done:
		lr.t.Fatalf("the log ended early: %v", err)
	case <-time.After(20 * time.Second):
		lr.t.Fatal("no line within 20s")
	}
	return ""
}

func (lr *lineReader) end() error {
	lr.t.Helper()
	select {
	case l := <-lr.lines:
		lr.t.Fatalf("line %q, want the end", l)
	case err := <-lr.done:
		return err
	case <-time.After(20 * time.Second):
		lr.t.Fatal("the log did not end within 20s")
	}
	return nil
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// A followed log streams what is written, follows a rotation to the new
// file, and ends once the container has stopped (seen at the state check
// on the clock).
func TestContainerLogsFollow(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	ts, node, path := logServer(t, clk, runtime.ContainerStateRunning, criLine(0, "stdout", "F", "first"), "")
	lr := follow(t, context.Background(), ts.URL+"/containerLogs/ns/web/app?follow=true")
	if l := lr.next(); l != "first\n" {
		t.Fatalf("line %q, want first", l)
	}
	appendTo(t, path, criLine(1, "stdout", "P", "sec"))
	appendTo(t, path, criLine(1, "stdout", "F", "ond"))
	if l := lr.next(); l != "second\n" {
		t.Fatalf("line %q, want second", l)
	}
	// Rotation: the file is renamed and a new one begins.
	appendTo(t, path, criLine(2, "stdout", "F", "last of the old file"))
	if err := os.Rename(path, path+".20260102-030405"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, path, criLine(3, "stdout", "F", "first of the new file"))
	if l := lr.next(); l != "last of the old file\n" {
		t.Fatalf("line %q, want the old file's last", l)
	}
	if l := lr.next(); l != "first of the new file\n" {
		t.Fatalf("line %q, want the new file's first", l)
	}
	// The lines were followed without asking the runtime at each write:
	// once for the request and once at the first pause.
	if n := node.statusCalls(); n > 2 {
		t.Errorf("the runtime was asked for the pod's status %d times, want 2", n)
	}
	node.setState("uid-1", runtime.ContainerStateExited)
	appendTo(t, path, criLine(4, "stdout", "F", "written as it stopped"))
	if l := lr.next(); l != "written as it stopped\n" {
		t.Fatalf("line %q", l)
	}
	stepWhenWaiting(t, clk, 5*time.Second)
	if err := lr.end(); err != io.EOF {
		t.Errorf("end of the followed log: %v, want EOF", err)
	}
}

// A client that goes ends the follow: the handler returns (goleak and the
// test server's Close, which waits for handlers, see to it).
func TestContainerLogsFollowEndsWhenTheClientGoes(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	ts, _, _ := logServer(t, clk, runtime.ContainerStateRunning, criLine(0, "stdout", "F", "first"), "")
	ctx, cancel := context.WithCancel(context.Background())
	lr := follow(t, ctx, ts.URL+"/containerLogs/ns/web/app?follow=true")
	if l := lr.next(); l != "first\n" {
		t.Fatalf("line %q", l)
	}
	cancel()
	if err := lr.end(); err == nil {
		t.Error("the read went on after the client cancelled")
	}
	ts.Close() // waits for the handler to return
}

// stepWhenWaiting steps clk by d once something waits on it, bounded in
// wall time.
func stepWhenWaiting(t *testing.T, clk *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("nothing waited on the clock within 20s")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(d)
}

// A line of 32 MiB without a newline, and a limit larger than the file,
// are copied through a fixed buffer.
func TestContainerLogsMemoryIsBounded(t *testing.T) {
	huge := t0.Format(time.RFC3339Nano) + " stdout P " + strings.Repeat("x", 32<<20)
	clk := clocktesting.NewFakeClock(t0)
	ts, _, _ := logServer(t, clk, runtime.ContainerStateRunning, huge, "")
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	resp, err := http.Get(ts.URL + "/containerLogs/ns/web/app?limitBytes=1000000000&timestamps=true")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	goruntime.ReadMemStats(&after)
	if want := int64(32<<20) + int64(len(t0.Format(time.RFC3339Nano))+1); n != want {
		t.Errorf("read %d bytes, want %d", n, want)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("serving a 32 MiB line allocated %d MiB, want under 8 MiB", grew>>20)
	}
}

// Following the log of a container that has already stopped returns what
// it wrote and ends, without waiting on the clock.
func TestContainerLogsFollowOfAStoppedContainerEnds(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	ts, _, _ := logServer(t, clk, runtime.ContainerStateExited, criLine(0, "stdout", "F", "last words"), "")
	code, body := get(t, ts.URL+"/containerLogs/ns/web/app?follow=true")
	if code != 200 || body != "last words\n" {
		t.Errorf("%d %q, want 200 \"last words\\n\"", code, body)
	}
}

// A followed log is exempt from the write timeout that bounds every other
// response: with a timeout of 1ns, /healthz cannot be answered, but the
// followed log is.
func TestFollowedLogsAreExemptFromTheWriteTimeout(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	if err := os.WriteFile(path, []byte(criLine(0, "stdout", "F", "still here")), 0o644); err != nil {
		t.Fatal(err)
	}
	node := newFakeNode()
	node.addPod("ns", "web", "uid-1", &runtime.ContainerStatus{ID: runtime.ContainerID{ID: "c"}, Name: "app", State: runtime.ContainerStateExited, LogPath: path, StartedAt: t0})
	srv, err := server.New(server.Config{Pods: node, Runtime: node, HTTP: server.HTTPConfig{WriteTimeout: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis, nil) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	base := "http://" + lis.Addr().String()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	if resp, err := client.Get(base + "/containerLogs/ns/web/app"); err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil && string(b) == "still here\n" {
			t.Fatal("a log that is not followed was answered despite a 1ns write timeout; the test cannot tell")
		}
	}
	resp, err := client.Get(base + "/containerLogs/ns/web/app?follow=true")
	if err != nil {
		t.Fatalf("followed log: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "still here\n" {
		t.Errorf("followed log under a 1ns write timeout: %q, %v", b, err)
	}
}

// apiStatusNode is a fakeNode that also gives its pods' API statuses.
type apiStatusNode struct {
	*fakeNode
	status map[types.UID]v1.PodStatus
}

func (n apiStatusNode) PodStatus(uid types.UID) (v1.PodStatus, bool) {
	st, ok := n.status[uid]
	return st, ok
}

// While a container waits out its restart back-off, its previous
// instance is the newest, which ended, as the API status's lastState
// names it and the kubelet reads it; without an API status it is the one
// before the newest.
func TestContainerLogsPreviousIsTheLastTerminated(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	ts, node, _ := logServer(t, clk, runtime.ContainerStateExited, criLine(0, "stdout", "F", "the newest, crashed"), criLine(-10, "stdout", "F", "the one before"))
	ts.Close()
	backOff := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
		Name:                 "app",
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3, ContainerID: "fake://c1"}},
	}}}
	for _, tc := range []struct {
		name string
		pods server.PodLister
		want string
		code int
	}{
		{"PodStatusGetter", apiStatusNode{node, map[types.UID]v1.PodStatus{"uid-1": backOff}}, "the newest, crashed\n", 200},
		{"no API status", node, "the one before\n", 200},
		{"no lastState", apiStatusNode{node, map[types.UID]v1.PodStatus{"uid-1": {ContainerStatuses: []v1.ContainerStatus{{Name: "app"}}}}},
			`previous terminated container "app" in pod "web" not found`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := server.New(server.Config{Pods: tc.pods, Runtime: node, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			code, body := getHandler(t, srv.Handler(), "/containerLogs/ns/web/app?previous=true")
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("previous: %d %q, want %d %q", code, body, tc.code, tc.want)
			}
		})
	}
}
