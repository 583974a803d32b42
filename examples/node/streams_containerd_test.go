package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	criapi "k8s.io/cri-api/pkg/apis"

	"github.com/nodekit/nodekit/internal/syncbuf"
	"github.com/nodekit/nodekit/runtime/cri"
)

// streamsNodeConfig makes the node rotate container logs past 16Ki,
// checked every 3s (the kubelet's least) by two workers, keeping 3 files:
// a container that writes fast sees its log rotated while it is followed.
const streamsNodeConfig = `containerLogMaxSize: 16Ki
containerLogMaxFiles: 3
containerLogMonitorInterval: 3s
containerLogMaxWorkers: 2
`

// streamsPod has a container that writes 2000 numbered lines a second
// (about 80 KiB of CRI log), one to exec in, and a busybox httpd on port
// 8080 of the pod.
func streamsPod(image string) *v1.Pod {
	c := func(name string, cmd ...string) v1.Container {
		return v1.Container{Name: name, Image: image, ImagePullPolicy: v1.PullNever, Command: cmd}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "streams"},
		Spec: v1.PodSpec{Containers: []v1.Container{
			c("writer", "sh", "-c", "i=0; while :; do seq $i $((i+1999)); i=$((i+2000)); sleep 1; done"),
			c("shell", "sleep", "3600"),
			c("web", "sh", "-c", "mkdir -p /tmp/www && echo hello-from-pod >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"),
		}},
	}
}

// checkThroughAPIServer uses the node through the API server as kubectl
// does (client-go's log stream, remotecommand and portforward, over SPDY
// and over WebSocket, which the API server translates to SPDY toward the
// node) and as Prometheus and metrics-server scrape it (the node proxy).
func checkThroughAPIServer(t *testing.T, n *containerdNode) {
	ctx := context.Background()
	pods := n.admin.CoreV1().Pods("default")
	n.runPod(t, streamsPod(n.image))
	crasher := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crasher"},
		Spec: v1.PodSpec{NodeName: n.name, Containers: []v1.Container{{Name: "crash", Image: n.image, ImagePullPolicy: v1.PullNever,
			Command: []string{"sh", "-c", "echo crashed-instance $(cat /proc/sys/kernel/random/uuid); exit 3"}}}},
	}
	crasher.Namespace = "default"
	if _, err := pods.Create(ctx, crasher, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("logs tailLines", func(t *testing.T) {
		eventually(t, 10*time.Second, "5 tail lines", func() (bool, string) {
			b, err := pods.GetLogs("streams", &v1.PodLogOptions{Container: "writer", TailLines: ptrTo[int64](5)}).DoRaw(ctx)
			if err != nil {
				return false, err.Error()
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			return len(lines) == 5 && consecutive(lines) == nil, fmt.Sprintf("%q", lines)
		})
	})

	t.Run("logs follow across rotations", func(t *testing.T) {
		logs, _ := filepath.Glob(filepath.Join(n.logsDir, "default_streams_*", "writer", "0.log"))
		if len(logs) != 1 {
			t.Fatalf("writer's log files: %v", logs)
		}
		rotatedBefore := rotatedFiles(logs[0])
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		rc, err := pods.GetLogs("streams", &v1.PodLogOptions{Container: "writer", Follow: true, TailLines: ptrTo[int64](1)}).Stream(fctx)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		// Read until the log was rotated twice since the start, every line
		// the one after the line before.
		sc := bufio.NewScanner(rc)
		var prev, read int
		rotations := 0
		for sc.Scan() {
			v, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatalf("line %q after %d: %v", sc.Text(), prev, err)
			}
			if read > 0 && v != prev+1 {
				t.Fatalf("followed log jumps from %d to %d (after %d lines, %d rotations)", prev, v, read, rotations)
			}
			prev, read = v, read+1
			if read%2000 == 0 {
				rotations = len(newNames(rotatedBefore, rotatedFiles(logs[0])))
				if rotations >= 2 {
					break
				}
			}
		}
		if rotations < 2 {
			t.Fatalf("the log was rotated %d times while %d lines were followed (err %v); rotated files %v", rotations, read, sc.Err(), rotatedFiles(logs[0]))
		}
		all, _ := filepath.Glob(logs[0] + "*")
		if len(all) > 3 {
			t.Errorf("%d log files, want containerLogMaxFiles 3 at most: %v", len(all), all)
		}
		t.Logf("followed %d lines across %d rotations; files now %v", read, rotations, all)
	})

	// As the kubelet does, the previous instance is the one the API
	// status names as the last terminated: while the container waits out
	// its back-off, that is the newest instance, which ended.
	t.Run("logs previous of a crash-looping container", func(t *testing.T) {
		var last string
		eventually(t, 40*time.Second, "the crasher in CrashLoopBackOff after a run", func() (bool, string) {
			p, err := pods.Get(ctx, "crasher", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, cs := range p.Status.ContainerStatuses {
				if w, lt := cs.State.Waiting, cs.LastTerminationState.Terminated; w != nil && w.Reason == "CrashLoopBackOff" && lt != nil {
					last = strings.TrimPrefix(lt.ContainerID, "containerd://")
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", p.Status.ContainerStatuses)
		})
		st, err := n.cri.ContainerStatus(ctx, last, false)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(st.GetStatus().GetLogPath())
		if err != nil {
			t.Fatal(err)
		}
		_, want, _ := strings.Cut(string(raw), " stdout F ") // one line: "<time> stdout F crashed-instance <uuid>"
		if !strings.HasPrefix(want, "crashed-instance ") {
			t.Fatalf("the last terminated instance logged %q", raw)
		}
		for _, previous := range []bool{true, false} {
			b, err := pods.GetLogs("crasher", &v1.PodLogOptions{Previous: previous}).DoRaw(ctx)
			if err != nil || string(b) != want {
				t.Errorf("logs (previous %v) of the crash-looping container: %q %v, want the last terminated instance's %q", previous, b, err, want)
			}
		}
	})

	execURL := func(cmd ...string) *url.URL {
		return n.admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("streams").SubResource("exec").
			VersionedParams(&v1.PodExecOptions{Container: "shell", Command: cmd, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
	}
	for _, proto := range []string{"SPDY", "WebSocket"} {
		t.Run("exec with stdin over "+proto, func(t *testing.T) {
			exec := executor(t, n.adminConfig, proto, execURL("cat"))
			xctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			in := strings.Repeat("through the API server\n", 1000)
			if err := exec.StreamWithContext(xctx, remotecommand.StreamOptions{Stdin: strings.NewReader(in), Stdout: &out, Stderr: &errOut}); err != nil {
				t.Fatalf("exec cat: %v (stderr %q)", err, errOut.String())
			}
			if out.String() != in {
				t.Errorf("cat gave back %d bytes, want the %d sent", out.Len(), len(in))
			}
		})
	}

	pfURL := n.admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("streams").SubResource("portforward").URL()
	for _, proto := range []string{"SPDY", "WebSocket"} {
		t.Run("port-forward over "+proto, func(t *testing.T) {
			dialer := pfDialer(t, n.adminConfig, proto, pfURL)
			stop, ready := make(chan struct{}), make(chan struct{})
			var pfOut, pfErr syncbuf.Buffer // written by a goroutine per connection
			fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, &pfOut, &pfErr)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- fw.ForwardPorts() }()
			defer func() {
				close(stop)
				if err := <-done; err != nil {
					t.Errorf("ForwardPorts: %v", err)
				}
			}()
			select {
			case <-ready:
			case err := <-done:
				done <- err
				t.Fatalf("port-forward ended before it was ready: %v %s", err, pfErr.String())
			case <-time.After(30 * time.Second):
				t.Fatalf("port-forward not ready in 30s: %s", pfErr.String())
			}
			ports, err := fw.GetPorts()
			if err != nil || len(ports) != 1 {
				t.Fatalf("ports %v %v", ports, err)
			}
			hc := &http.Client{Timeout: 20 * time.Second}
			for i := range 3 { // a connection each time: a stream each through the forward
				resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/", ports[0].Local))
				if err != nil {
					t.Fatalf("GET %d through the forward: %v (%s)", i, err, pfErr.String())
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != "hello-from-pod\n" {
					t.Errorf("GET %d through the forward: %d %q", i, resp.StatusCode, b)
				}
				hc.CloseIdleConnections()
			}
		})
	}

	// Prometheus scrapes the node's server directly, with a bearer token
	// (the API server's node proxy refuses a loopback node); the node
	// checks it with a TokenReview and asks a SubjectAccessReview for
	// nodes/metrics.
	t.Run("metrics scraped with a token", func(t *testing.T) {
		hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		scrape := func(path, token string) (int, string) {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", n.port, path), nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		code, cadvisor := scrape("/metrics/cadvisor", n.adminConfig.BearerToken)
		if code != http.StatusOK {
			t.Fatalf("/metrics/cadvisor: %d %s", code, cadvisor)
		}
		for _, want := range []string{
			`container_cpu_usage_seconds_total{container="writer",cpu="total",id="`,
			`container_memory_working_set_bytes{container="writer",id="`,
			`container_fs_usage_bytes{container="writer",device="`,
			`container_start_time_seconds{container="web",id="`,
			"machine_cpu_cores{",
		} {
			if !strings.Contains(cadvisor, want) {
				t.Errorf("/metrics/cadvisor lacks %s", want)
			}
		}
		if !slices.ContainsFunc(strings.Split(cadvisor, "\n"), func(l string) bool {
			return strings.HasPrefix(l, "container_memory_working_set_bytes{") && strings.Contains(l, `namespace="default",pod="streams"`) && !strings.Contains(l, "} 0 ")
		}) {
			t.Errorf("/metrics/cadvisor has no working set for pod streams:\n%s", cadvisor)
		}
		if code, resource := scrape("/metrics/resource", n.adminConfig.BearerToken); code != http.StatusOK ||
			!strings.Contains(resource, `container_cpu_usage_seconds_total{container="writer",namespace="default",pod="streams"}`) {
			t.Errorf("/metrics/resource: %d, lacks the writer's CPU:\n%s", code, resource)
		}
		if code, body := scrape("/metrics/cadvisor", "not-a-token"); code != http.StatusUnauthorized {
			t.Errorf("/metrics/cadvisor with a bad token: %d %q, want 401", code, body)
		}
	})

	t.Run("exec latency", func(t *testing.T) {
		for _, proto := range []string{"SPDY", "WebSocket"} {
			d := execLatencies(t, executor(t, n.adminConfig, proto, execURL("true")), 10)
			t.Logf("exec true through the API server over %s: median %v, max %v of %d", proto, d[len(d)/2], d[len(d)-1], len(d))
		}
		direct := &url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", n.port), Path: "/exec/default/streams/shell",
			RawQuery: "command=true&input=1&output=1&error=1"}
		d := execLatencies(t, executor(t, n.nodeClientConfig(), "SPDY", direct), 10)
		t.Logf("exec true on the node's server directly over SPDY: median %v, max %v of %d", d[len(d)/2], d[len(d)-1], len(d))
	})
}

// nodeClientConfig is a client of the node's own server with the API
// server's kubelet client certificate.
func (n *containerdNode) nodeClientConfig() *rest.Config {
	return &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", n.port), TLSClientConfig: rest.TLSClientConfig{
		Insecure: true, CertFile: n.clientCert, KeyFile: n.clientKey}}
}

// executor is a remotecommand executor over SPDY (POST) or WebSocket
// (GET), as kubectl builds one.
func executor(t testing.TB, cfg *rest.Config, proto string, u *url.URL) remotecommand.Executor {
	t.Helper()
	var e remotecommand.Executor
	var err error
	if proto == "WebSocket" {
		e, err = remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
	} else {
		e, err = remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// pfDialer is a port-forward dialer over SPDY, or over WebSocket
// tunnelling SPDY, as kubectl builds one.
func pfDialer(t testing.TB, cfg *rest.Config, proto string, u *url.URL) httpstream.Dialer {
	t.Helper()
	if proto == "WebSocket" {
		d, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
}

// execLatencies runs the executor's command n times and returns the
// round trips, sorted.
func execLatencies(t testing.TB, e remotecommand.Executor, n int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		var stdout, stderr bytes.Buffer
		err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr})
		d := time.Since(start)
		cancel()
		if err != nil {
			t.Fatalf("exec %d: %v (stderr %q)", i, err, stderr.String())
		}
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// consecutive checks that lines are numbers, each one more than the last.
func consecutive(lines []string) error {
	for i, l := range lines {
		v, err := strconv.Atoi(l)
		if err != nil {
			return err
		}
		if i > 0 {
			if p, _ := strconv.Atoi(lines[i-1]); v != p+1 {
				return fmt.Errorf("%d follows %d", v, p)
			}
		}
	}
	return nil
}

// rotatedFiles lists the rotated files of log, by their names without
// the .gz a compression adds.
func rotatedFiles(log string) []string {
	names, _ := filepath.Glob(log + ".*")
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".gz")
	}
	return names
}

// newNames returns the names of after that are not in before.
func newNames(before, after []string) []string {
	var out []string
	for _, n := range after {
		if !slices.Contains(before, n) {
			out = append(out, n)
		}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// BenchmarkExecOnContainerd times one exec of "true" in a running
// container, round trip, as kubectl sees it: through the API server over
// SPDY and over WebSocket, on the node's server directly, and, for what
// the runtime itself costs, containerd's ExecSync. It needs what
// TestRunOnContainerd needs (make e2e's containerd and the kube tools):
//
//	set -a; . /tmp/nodekit-e2e/env; set +a
//	NODEKIT_KUBE_TOOLS=~/.cache/nodekit/tools go test -run '^$' -bench ExecOnContainerd ./examples/node/
func BenchmarkExecOnContainerd(b *testing.B) {
	n := startContainerdNode(b, "")
	pod := n.runPod(b, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-exec"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "shell", Image: n.image, ImagePullPolicy: v1.PullNever,
			Command: []string{"sleep", "3600"}}}},
	})
	u := n.admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("bench-exec").SubResource("exec").
		VersionedParams(&v1.PodExecOptions{Container: "shell", Command: []string{"true"}, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
	direct := &url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", n.port), Path: "/exec/default/bench-exec/shell",
		RawQuery: "command=true&input=1&output=1&error=1"}
	for _, tc := range []struct {
		name string
		exec remotecommand.Executor
	}{
		{"APIServer-SPDY", executor(b, n.adminConfig, "SPDY", u)},
		{"APIServer-WebSocket", executor(b, n.adminConfig, "WebSocket", u)},
		{"node-SPDY", executor(b, n.nodeClientConfig(), "SPDY", direct)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				execLatencies(b, tc.exec, 1)
			}
		})
	}
	// What the node's server asks of the runtime before an exec: the
	// pod's observed containers.
	b.Run("runtime-GetPodStatus", func(b *testing.B) {
		rt, err := cri.New(cri.Config{RuntimeService: n.cri, ImageService: n.cri.(criapi.ImageManagerService)})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := rt.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CRI-ExecSync", func(b *testing.B) {
		id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
		for b.Loop() {
			if _, _, err := n.cri.ExecSync(context.Background(), id, []string{"true"}, 30*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
}
