package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
)

// serve runs srv on a free loopback port until the test ends and returns
// its address.
func serve(t *testing.T, srv *server.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

func TestHTTPLimits(t *testing.T) {
	srv, err := server.New(server.Config{Pods: newFakeNode(), HTTP: server.HTTPConfig{MaxHeaderBytes: 1024, MaxBodyBytes: 16}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	do := func(method, path string, body io.Reader, header http.Header) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+addr+path, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, path := range []string{"/healthz", "/pods", "/metrics", "/runningpods/", "/configz", "/containerLogs/ns/pod/c"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			resp := do(method, path, nil, nil)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405, Allow \"GET, HEAD\"", method, path, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	}
	if resp := do(http.MethodGet, "/pods", strings.NewReader(strings.Repeat("x", 17)), nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("GET /pods with a 17-byte body: %d, want 413", resp.StatusCode)
	}
	chunked := io.MultiReader(strings.NewReader(strings.Repeat("x", 10)), strings.NewReader(strings.Repeat("x", 10)))
	if resp := do(http.MethodGet, "/pods", chunked, nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("GET /pods with a 20-byte chunked body: %d, want 413", resp.StatusCode)
	}
	huge := http.Header{"X-Huge": {strings.Repeat("h", 64<<10)}}
	if resp := do(http.MethodGet, "/healthz", nil, huge); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("GET /healthz with 64 KiB of headers: %d, want 431", resp.StatusCode)
	}
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	srv, err := server.New(server.Config{Pods: newFakeNode(), HTTP: server.HTTPConfig{IdleTimeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("reading the idle connection: %v, want EOF", err)
	}
}

func TestReadOnlyEndpoints(t *testing.T) {
	node := newFakeNode()
	node.addPod("ns", "web", "uid-1")
	node.running = []*runtime.Pod{{ID: "uid-1", Name: "web", Namespace: "ns", Containers: []*runtime.Container{{Name: "app", Image: "busybox:1"}}}}
	srv, err := server.New(server.Config{
		Pods: node, Runtime: node,
		Healthy: func() error { return errors.New("PLEG is not healthy") },
		Configz: func() (any, error) { return map[string]any{"port": 10250}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	if code, body := get(t, ts.URL+"/healthz"); code != 500 || !strings.Contains(body, "PLEG is not healthy") {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body := get(t, ts.URL+"/runningpods/")
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("/runningpods/: %d %q %v", code, body, err)
	}
	if len(list.Items) != 1 || list.Items[0].UID != "uid-1" || list.Items[0].Namespace != "ns" ||
		!cmp.Equal(list.Items[0].Spec.Containers, []v1.Container{{Name: "app", Image: "busybox:1"}}) {
		t.Errorf("/runningpods/: %+v", list.Items)
	}
	code, body = get(t, ts.URL+"/configz")
	if code != 200 || strings.TrimSpace(body) != `{"kubeletconfig":{"port":10250}}` {
		t.Errorf("/configz: %d %q", code, body)
	}
	code, body = get(t, ts.URL+"/pods")
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Errorf("/pods: %d %q", code, body)
	}
	noConfigz, err := server.New(server.Config{Pods: node})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	noConfigz.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/configz", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("/configz without Config.Configz: %d, want 404", rec.Code)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{}, "Config.Pods is required"},
		{server.Config{Pods: newFakeNode(), Authorizer: server.AuthorizerFunc(nil)}, "without Config.Authenticator"},
	} {
		if _, err := server.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, want %q", err, tc.want)
		}
	}
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func mustRequest(t *testing.T, path string) *http.Request {
	t.Helper()
	return httptest.NewRequest(http.MethodGet, path, nil)
}

// The read-only handler serves the kubelet's read-only port: /pods,
// /healthz, /metrics and /stats/summary to a client without credentials
// although the server authenticates, and refuses the debugging paths
// (exec, attach, port-forward, run, logs) with 405 as the kubelet does.
func TestReadOnlyHandler(t *testing.T) {
	node := newFakeNode()
	node.addPod("ns", "web", "uid-1")
	authn, err := server.NewAuthenticator(server.AuthenticatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	authz := server.AuthorizerFunc(func(context.Context, server.Attributes) (server.Decision, string, error) {
		return server.DecisionDeny, "no", nil
	})
	srv, err := server.New(server.Config{NodeName: "n", Pods: node, Runtime: node, Authenticator: authn, Authorizer: authz})
	if err != nil {
		t.Fatal(err)
	}
	main := httptest.NewServer(srv.Handler())
	defer main.Close()
	if code, _ := get(t, main.URL+"/pods"); code != http.StatusUnauthorized {
		t.Fatalf("main handler /pods without credentials: %d, want 401", code)
	}
	ts := httptest.NewServer(srv.ReadOnlyHandler())
	defer ts.Close()
	code, body := get(t, ts.URL+"/pods")
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Errorf("read-only /pods: %d %q", code, body)
	}
	for path, want := range map[string]int{
		"/healthz": 200, "/metrics": 200,
		"/stats/summary":            http.StatusServiceUnavailable, // no Config.Stats: served, but nothing to read
		"/configz":                  http.StatusNotFound,
		"/exec/ns/web/c?command=sh": http.StatusMethodNotAllowed, "/attach/ns/web/c": http.StatusMethodNotAllowed,
		"/portForward/ns/web": http.StatusMethodNotAllowed, "/run/ns/web/c": http.StatusMethodNotAllowed,
		"/containerLogs/ns/web/c": http.StatusMethodNotAllowed, "/runningpods/": http.StatusMethodNotAllowed,
	} {
		if code, body := get(t, ts.URL+path); code != want {
			t.Errorf("read-only %s: %d %q, want %d", path, code, body, want)
		}
	}
	resp, err := http.Post(ts.URL+"/exec/ns/web/c?command=sh", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("read-only POST /exec: %d, want 405", resp.StatusCode)
	}
}
