package probes_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/probes"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func target(c *v1.Container) probes.Target {
	return probes.Target{Pod: &v1.Pod{}, Container: c, PodIP: "127.0.0.1"}
}

func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func TestHTTPProbe(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	// A second loopback address stands in for "another host"; without one
	// only the case that needs it is skipped.
	otherURL, noOther := "", error(nil)
	if l, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		noOther = err
	} else {
		other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		other.Listener = l
		other.Start()
		defer other.Close()
		otherURL = other.URL
	}
	// A second server on 127.0.0.1: the same host name on another port.
	var secondHits atomic.Int32
	second := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secondHits.Add(1)
		w.Write([]byte("second"))
	}))
	defer second.Close()
	_, secondPort := hostPort(t, second.Listener.Addr().String())
	var gotUA, gotHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			gotUA, gotHeader = r.UserAgent(), r.Header.Get("X-Probe")
			w.Write([]byte("fine"))
		case "/fail":
			http.Error(w, "broken", http.StatusInternalServerError)
		case "/same":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/elsewhere":
			http.Redirect(w, r, otherURL+"/", http.StatusFound)
		case "/other-port":
			http.Redirect(w, r, "http://127.0.0.1:"+strconv.Itoa(secondPort)+"/", http.StatusFound)
		case "/by-name":
			http.Redirect(w, r, "http://localhost:"+strconv.Itoa(secondPort)+"/", http.StatusFound)
		case "/not-modified":
			w.WriteHeader(http.StatusNotModified)
		case "/hang":
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	_, port := hostPort(t, srv.Listener.Addr().String())
	c := &v1.Container{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	h := &probes.Handlers{}
	for _, tc := range []struct {
		name    string
		path    string
		port    intstr.IntOrString
		want    probes.Result
		output  string
		wantErr string
		other   bool // redirects to the second loopback address
	}{
		{"ok by port name", "/ok", intstr.FromString("http"), probes.Success, "fine", "", false},
		{"500", "/fail", intstr.FromInt32(int32(port)), probes.Failure, "statuscode: 500", "", false},
		{"redirect to the same host", "/same", intstr.FromInt32(int32(port)), probes.Success, "fine", "", false},
		{"redirect to another port of the same host", "/other-port", intstr.FromInt32(int32(port)), probes.Success, "second", "", false},
		{"redirect elsewhere", "/elsewhere", intstr.FromInt32(int32(port)), probes.Warning,
			`Probe terminated redirects, Response body: <a href="` + otherURL + `/">Found</a>.`, "", true},
		{"redirect to another host name", "/by-name", intstr.FromInt32(int32(port)), probes.Warning,
			`Probe terminated redirects, Response body: <a href="http://localhost:` + strconv.Itoa(secondPort) + `/">Found</a>.`, "", false},
		{"3xx answer", "/not-modified", intstr.FromInt32(int32(port)), probes.Warning, "Probe terminated redirects", "", false},
		{"timeout", "/hang", intstr.FromInt32(int32(port)), probes.Failure, "", "", false},
		{"unknown port name", "/ok", intstr.FromString("nope"), probes.Failure, "", `has no port named "nope"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.other && noOther != nil {
				t.Skipf("no second loopback address: %v", noOther)
			}
			p := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: tc.path, Port: tc.port,
				HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}}}
			start := time.Now()
			r, out, err := h.Probe(context.Background(), target(c), p, 300*time.Millisecond)
			if r != tc.want || !strings.Contains(out, tc.output) || (tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr))) {
				t.Errorf("%s: %v %q %v, want %v %q %q", tc.path, r, out, err, tc.want, tc.output, tc.wantErr)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("%s took %v, past the timeout", tc.path, d)
			}
		})
	}
	if n := secondHits.Load(); n != 1 {
		t.Errorf("the second server was asked %d times, want once (only the same-host redirect is followed)", n)
	}
	if !strings.HasPrefix(gotUA, "kube-probe/") || gotHeader != "yes" {
		t.Errorf("user agent %q, header %q", gotUA, gotHeader)
	}
}

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, open := hostPort(t, l.Addr().String())
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	_, closedPort := hostPort(t, closed.Addr().String())
	closed.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	defer l.Close()
	h := &probes.Handlers{}
	c := &v1.Container{Name: "db"}
	for port, want := range map[int]probes.Result{open: probes.Success, closedPort: probes.Failure} {
		p := &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}
		if r, out, _ := h.Probe(context.Background(), target(c), p, time.Second); r != want {
			t.Errorf("port %d: %v (%s), want %v", port, r, out, want)
		}
	}
}

func TestGRPCProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	go g.Serve(l)
	defer g.Stop()
	_, port := hostPort(t, l.Addr().String())
	h := &probes.Handlers{}
	for service, want := range map[string]probes.Result{"": probes.Success, "db": probes.Failure} {
		p := &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port), Service: ptr.To(service)}}}
		r, out, err := h.Probe(context.Background(), target(&v1.Container{}), p, time.Second)
		if r != want || err != nil {
			t.Errorf("service %q: %v %q %v, want %v", service, r, out, err, want)
		}
		if want == probes.Failure && !strings.Contains(out, "NOT_SERVING") {
			t.Errorf("output %q does not say NOT_SERVING", out)
		}
	}
}

func TestExecProbeAndBadProbes(t *testing.T) {
	ctx := context.Background()
	fake, _ := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: "u"}}
	sb, _ := fake.RunPodSandbox(ctx, sbCfg, "")
	id, _ := fake.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Envs: []*runtimeapi.KeyValue{{Key: fakecri.EnvExec, Value: []byte(`{"cat /tmp/healthy": {"exitCode": 1, "stderr": "no such file"}}`)}},
	}, sbCfg)
	fake.StartContainer(ctx, id)
	h := &probes.Handlers{Exec: fake}
	tg := probes.Target{Pod: &v1.Pod{}, Container: &v1.Container{Name: "c"}, ContainerID: id}
	exec := func(cmd ...string) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}}
	}
	if r, _, err := h.Probe(ctx, tg, exec("true"), time.Second); r != probes.Success || err != nil {
		t.Errorf("true: %v %v", r, err)
	}
	if r, out, _ := h.Probe(ctx, tg, exec("cat", "/tmp/healthy"), time.Second); r != probes.Failure || !strings.Contains(out, "no such file") {
		t.Errorf("cat: %v %q", r, out)
	}
	if r, _, err := h.Probe(ctx, tg, &v1.Probe{}, time.Second); r != probes.Failure || err == nil || !strings.Contains(err.Error(), "no handler") {
		t.Errorf("no handler: %v %v", r, err)
	}
	two := exec("true")
	two.TCPSocket = &v1.TCPSocketAction{Port: intstr.FromInt32(1)}
	if r, _, err := h.Probe(ctx, tg, two, time.Second); r != probes.Failure || err == nil || !strings.Contains(err.Error(), "more than one") {
		t.Errorf("two handlers: %v %v", r, err)
	}
}

func TestHTTPSProbeSkipsCertificateChecks(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 64<<10))) // beyond the 10 KiB read limit
	}))
	defer srv.Close()
	_, port := hostPort(t, srv.Listener.Addr().String())
	p := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Scheme: v1.URISchemeHTTPS, Port: intstr.FromInt32(int32(port))}}}
	r, out, err := (&probes.Handlers{}).Probe(context.Background(), target(&v1.Container{}), p, time.Second)
	if r != probes.Success || err != nil {
		t.Fatalf("HTTPS probe of a self-signed server: %v %v", r, err)
	}
	if len(out) != 10<<10 {
		t.Errorf("read %d bytes of the body, want the 10 KiB limit", len(out))
	}
}
