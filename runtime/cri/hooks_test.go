package cri_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	criapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// logLines is a logger that keeps every line it is given.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 4})
}

func (l *logLines) with(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// hookServer records the requests it gets; it listens on every address,
// so a pod IP of fakecri's loopback range reaches it.
type hookServer struct {
	*httptest.Server
	port int
	mu   sync.Mutex
	got  []string // "host path"
}

func newHookServer(t *testing.T, handler http.HandlerFunc) *hookServer {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &hookServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.got = append(s.got, r.Host+" "+r.URL.Path)
		s.mu.Unlock()
		if handler != nil {
			handler(w, r)
		}
	}))
	s.Server.Listener.Close()
	s.Server.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	s.port = ln.Addr().(*net.TCPAddr).Port
	return s
}

func (s *hookServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// orphanOf returns the runtime's view of the pod, with no spec.
func orphanOf(h *harness, pod *v1.Pod) *runtime.Pod {
	h.t.Helper()
	pods, err := h.rt.GetPods(h.ctx, false)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, p := range pods {
		if p.ID == pod.UID {
			return p
		}
	}
	h.t.Fatalf("pod %s is not in GetPods: %+v", pod.UID, pods)
	return nil
}

func TestOrphanHTTPPreStopHookUsesWhatWasRecorded(t *testing.T) {
	srv := newHookServer(t, nil)
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app", "plain")
	c := &pod.Spec.Containers[0]
	c.Ports = []v1.ContainerPort{{Name: "web", ContainerPort: int32(srv.port)}}
	c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/drain", Port: intstr.FromString("web")}}}
	h.sync(pod)
	st := h.status(pod)
	if len(st.IPs) == 0 {
		t.Fatal("the pod has no IP")
	}

	// The pod's spec is gone: only the runtime's record is left.
	if err := h.rt.KillPod(h.ctx, nil, orphanOf(h, pod), nil); err != nil {
		t.Fatal(err)
	}
	want := net.JoinHostPort(st.IPs[0], strconv.Itoa(srv.port)) + " /drain"
	if got := srv.requests(); len(got) != 1 || got[0] != want {
		t.Errorf("hook requests %q, want one %q (the pod IP and the recorded named port)", got, want)
	}
	for _, c := range h.status(pod).ContainerStatuses {
		if c.State != runtime.ContainerStateExited {
			t.Errorf("container %s is %s after KillPod", c.Name, c.State)
		}
	}
}

func TestHTTPPreStopHookOfAKnownPodGoesToThePodIP(t *testing.T) {
	srv := newHookServer(t, nil)
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/bye", Port: intstr.FromInt32(int32(srv.port))}}}
	h.sync(pod)
	ip := h.status(pod).IPs[0]
	if err := h.rt.KillPod(h.ctx, pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	want := net.JoinHostPort(ip, strconv.Itoa(srv.port)) + " /bye"
	if got := srv.requests(); len(got) != 1 || got[0] != want {
		t.Errorf("hook requests %q, want one %q", got, want)
	}
}

// panicky is a runtime whose StopContainer or ExecSync panics.
type panicky struct {
	criapi.RuntimeService
	mu         sync.Mutex
	stopPanics map[string]bool // container IDs
	execPanics bool
}

func (p *panicky) StopContainer(ctx context.Context, id string, timeout int64) error {
	p.mu.Lock()
	bad := p.stopPanics[id]
	p.mu.Unlock()
	if bad {
		panic("boom in StopContainer")
	}
	return p.RuntimeService.StopContainer(ctx, id, timeout)
}

func (p *panicky) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	p.mu.Lock()
	bad := p.execPanics
	p.mu.Unlock()
	if bad {
		panic("boom in ExecSync")
	}
	return p.RuntimeService.ExecSync(ctx, id, cmd, timeout)
}

func TestPanicInAParallelKillIsThatContainersError(t *testing.T) {
	var logs logLines
	var p *panicky
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
		p = &panicky{RuntimeService: c.RuntimeService, stopPanics: map[string]bool{}}
		c.RuntimeService = p
		c.Logger = logs.logger()
	})
	pod := testPod(v1.RestartPolicyAlways, nil, "bad", "good")
	h.sync(pod)
	bad := h.status(pod).FindContainerStatus("bad").ID.ID
	p.mu.Lock()
	p.stopPanics[bad] = true
	p.mu.Unlock()

	err := h.rt.KillPod(h.ctx, pod, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "panic: boom in StopContainer") || !strings.Contains(err.Error(), "bad") {
		t.Errorf("KillPod: %v, want an error naming the container and the panic", err)
	}
	if got := h.status(pod).FindContainerStatus("good"); got.State != runtime.ContainerStateExited {
		t.Errorf("the other container is %s, want exited", got.State)
	}
	lines := logs.with("recovered a panic")
	if len(lines) != 1 || !strings.Contains(lines[0], `"pod"="ns/p"`) || !strings.Contains(lines[0], "goroutine") {
		t.Errorf("log lines %q, want one naming the pod with the stack", lines)
	}
}

func TestPanicInAPreStopHookIsAHookFailure(t *testing.T) {
	var logs logLines
	var p *panicky
	reg := prometheus.NewRegistry()
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
		p = &panicky{RuntimeService: c.RuntimeService}
		c.RuntimeService = p
		c.Logger = logs.logger()
		c.Registerer = reg
	})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](20)
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
	h.sync(pod)
	id := h.status(pod).FindContainerStatus("app").ID.ID
	p.mu.Lock()
	p.execPanics = true
	p.mu.Unlock()

	if err := h.rt.KillPod(h.ctx, pod, nil, nil); err != nil {
		t.Fatalf("KillPod: %v", err)
	}
	if got := h.rec.stops[id]; got != 20 {
		t.Errorf("stopped with %ds, want the whole 20", got)
	}
	if ev := h.eventsWith("FailedPreStopHook"); len(ev) != 1 || !strings.Contains(ev[0], "panic: boom in ExecSync") {
		t.Errorf("events %q, want one FailedPreStopHook naming the panic", ev)
	}
	if lines := logs.with("recovered a panic"); len(lines) != 1 || !strings.Contains(lines[0], "uid-p") {
		t.Errorf("log lines %q, want one naming the pod", lines)
	}
	want := "# HELP nodekit_runtime_panics_total Panics recovered from a pod's steps in the runtime (a lifecycle hook, a container's kill); each fails its step.\n# TYPE nodekit_runtime_panics_total counter\nnodekit_runtime_panics_total 1\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nodekit_runtime_panics_total"); err != nil {
		t.Error(err)
	}
}
