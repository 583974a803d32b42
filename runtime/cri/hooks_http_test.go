package cri_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// seen is one request a hook server got.
type seen struct {
	tls           bool
	path          string
	host          string
	userAgent     string
	accept        string
	authorization string
}

// recording wraps a handler and keeps what each request looked like.
type recording struct {
	mu   sync.Mutex
	got  []seen
	next http.HandlerFunc
}

func (rec *recording) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.got = append(rec.got, seen{tls: r.TLS != nil, path: r.URL.Path, host: r.Host, userAgent: r.UserAgent(),
		accept: r.Header.Get("Accept"), authorization: r.Header.Get("Authorization")})
	rec.mu.Unlock()
	if rec.next != nil {
		rec.next(w, r)
	}
}

func (rec *recording) requests() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.got...)
}

func portOf(t *testing.T, addr net.Addr) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr.String())
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// hookPod is a host-network pod whose container "app" has the postStart
// HTTP hook g, so the hook goes to the node's IP, 127.0.0.1.
func hookPod(g *v1.HTTPGetAction) *v1.Pod {
	pod := testPod(v1.RestartPolicyNever, nil, "app")
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: g}}
	return pod
}

// syncHook starts the pod and returns the step of its container "app".
func syncHook(t *testing.T, pod *v1.Pod) (*harness, *runtime.SyncStep) {
	t.Helper()
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.NodeIPs = []string{"127.0.0.1"} })
	res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
	return h, lastStep(res, "app")
}

func TestHTTPSPostStartHook(t *testing.T) {
	rec := &recording{}
	srv := httptest.NewTLSServer(rec) // a self-signed certificate nobody trusts
	defer srv.Close()
	pod := hookPod(&v1.HTTPGetAction{Scheme: v1.URISchemeHTTPS, Path: "/echo", Port: intstr.FromInt32(portOf(t, srv.Listener.Addr()))})
	h, step := syncHook(t, pod)
	if step.Err != nil {
		t.Fatalf("HTTPS postStart: %v, want success (no certificate check, as the kubelet)", step.Err)
	}
	got := rec.requests()
	if len(got) != 1 || !got[0].tls || got[0].path != "/echo" || got[0].userAgent != "kube-lifecycle/1.37" || got[0].accept != "*/*" {
		t.Errorf("requests %+v, want one over TLS to /echo with the kubelet's User-Agent and Accept", got)
	}
	if ev := h.eventsWith("LifecycleHTTPFallback"); len(ev) != 0 {
		t.Errorf("events %v, want no fallback", ev)
	}
}

func TestHTTPSHookAnsweredInHTTPIsRetriedOverHTTP(t *testing.T) {
	rec := &recording{}
	srv := httptest.NewServer(rec) // plain HTTP
	defer srv.Close()
	port := portOf(t, srv.Listener.Addr())
	pod := hookPod(&v1.HTTPGetAction{Scheme: v1.URISchemeHTTPS, Path: "/echo", Port: intstr.FromInt32(port),
		HTTPHeaders: []v1.HTTPHeader{{Name: "Authorization", Value: "Bearer secret"}, {Name: "X-Keep", Value: "1"}}})
	h, step := syncHook(t, pod)
	if step.Err != nil {
		t.Fatalf("HTTPS postStart to an HTTP server: %v, want success after the retry over HTTP", step.Err)
	}
	got := rec.requests()
	if len(got) != 1 || got[0].tls || got[0].path != "/echo" || got[0].authorization != "" {
		t.Errorf("requests %+v, want one plain HTTP request to /echo without the Authorization header", got)
	}
	ev := h.eventsWith("LifecycleHTTPFallback")
	want := "LifecycleHTTPFallback: request to HTTPS lifecycle hook 127.0.0.1:" + strconv.Itoa(int(port)) + " got HTTP response, retry with HTTP succeeded"
	if len(ev) != 1 || ev[0] != want {
		t.Errorf("fallback events %q, want [%q]", ev, want)
	}
	if ev := h.eventsWith("FailedPostStartHook"); len(ev) != 0 {
		t.Errorf("events %v, want no hook failure", ev)
	}
	if st := h.status(pod).FindContainerStatus("app"); st.State != runtime.ContainerStateRunning {
		t.Errorf("container %s, want running", st.State)
	}
}

// TestHTTPSHookWhoseRetryFailsFails: a server that answers the HTTPS
// attempt in plain HTTP, then hangs up on the retry: the hook fails with
// the first error and no fallback is reported.
func TestHTTPSHookWhoseRetryFailsFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if n == 0 {
				_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			}
			_ = c.Close()
		}
	}()
	pod := hookPod(&v1.HTTPGetAction{Scheme: v1.URISchemeHTTPS, Path: "/echo", Port: intstr.FromInt32(portOf(t, ln.Addr()))})
	h, step := syncHook(t, pod)
	if step.Err == nil || step.Reason != cri.ReasonPostStartHookError || !strings.Contains(step.Message, "server gave HTTP response to HTTPS client") {
		t.Errorf("step %+v, want PostStartHookError with the HTTPS error", step)
	}
	if ev := h.eventsWith("LifecycleHTTPFallback"); len(ev) != 0 {
		t.Errorf("events %v, want no fallback", ev)
	}
}

func TestHTTPHookStatusCodeDoesNotFailIt(t *testing.T) {
	rec := &recording{next: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "broken", http.StatusInternalServerError) }}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	pod := hookPod(&v1.HTTPGetAction{Path: "/fail", Port: intstr.FromInt32(portOf(t, srv.Listener.Addr()))})
	h, step := syncHook(t, pod)
	if step.Err != nil || len(rec.requests()) != 1 {
		t.Errorf("postStart answered 500: %v after %d requests, want success after 1 (the kubelet looks only at whether an answer came)", step.Err, len(rec.requests()))
	}
	if st := h.status(pod).FindContainerStatus("app"); st.State != runtime.ContainerStateRunning {
		t.Errorf("container %s, want running", st.State)
	}
}

func TestHTTPHookFollowsRedirectsOnlyToTheSameHost(t *testing.T) {
	rec := &recording{}
	ln, err := net.Listen("tcp", "0.0.0.0:0") // 127.0.0.1 and 127.0.0.2 both reach it
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(rec)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	port := strconv.Itoa(int(portOf(t, ln.Addr())))
	rec.next = func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/local":
			http.Redirect(w, r, "/moved", http.StatusFound)
		case "/elsewhere":
			http.Redirect(w, r, "http://127.0.0.2:"+port+"/other-host", http.StatusFound)
		}
	}
	for _, tc := range []struct{ path, want string }{
		{"/local", "/local /moved"},
		{"/elsewhere", "/elsewhere"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec.mu.Lock()
			rec.got = nil
			rec.mu.Unlock()
			pod := hookPod(&v1.HTTPGetAction{Path: tc.path, Port: intstr.FromInt32(portOf(t, ln.Addr()))})
			_, step := syncHook(t, pod)
			if step.Err != nil {
				t.Errorf("postStart: %v, want success", step.Err)
			}
			var paths []string
			for _, s := range rec.requests() {
				paths = append(paths, s.path)
			}
			if got := strings.Join(paths, " "); got != tc.want {
				t.Errorf("requests %q, want %q", got, tc.want)
			}
		})
	}
}
