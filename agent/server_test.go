package agent_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
)

// serving runs an agent on fakecri with an HTTP server on a free loopback
// port and returns its address.
func serving(t *testing.T, httpCfg agent.HTTPConfig) string {
	t.Helper()
	fake := newFake(t)
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake,
		Sources: []podsource.Source{podsource.NewChannel("api", 0)},
		Listen:  "127.0.0.1:0", HTTP: httpCfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	addr := a.Addr()
	if addr == "" {
		t.Fatal("the agent did not listen")
	}
	return addr
}

// An address in use ends Run with an error naming it, and Addr returns ""
// at once instead of waiting for a server that will never be.
func TestAddrDoesNotBlockWhenTheAddressIsInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	fake := newFake(t)
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake,
		Sources: []podsource.Source{podsource.NewChannel("api", 0)},
		Listen:  taken.Addr().String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	addr := make(chan string, 1)
	go func() { addr <- a.Addr() }()
	select {
	case got := <-addr:
		if got != "" {
			t.Errorf("Addr() = %q, want \"\" when the address is in use", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Addr() still blocks 20s after Run failed to listen")
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), taken.Addr().String()) || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("Run() = %v, want an error naming %s and the address in use", err, taken.Addr())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run() did not return 20s after it could not listen")
	}
}

func TestHTTPServerRefusesWhatNoEndpointServes(t *testing.T) {
	addr := serving(t, agent.HTTPConfig{MaxHeaderBytes: 1024, MaxBodyBytes: 16})
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
	for _, path := range []string{"/healthz", "/pods", "/metrics"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			resp := do(method, path, nil, nil)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405, Allow \"GET, HEAD\"", method, path, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			if resp := do(method, path, nil, nil); resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotFound {
				t.Errorf("%s %s: %d, want it served", method, path, resp.StatusCode)
			}
		}
	}
	if resp := do(http.MethodGet, "/pods", strings.NewReader(strings.Repeat("x", 17)), nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("GET /pods with a 17-byte body: %d, want 413", resp.StatusCode)
	}
	// A chunked body has no length to check in advance.
	chunked := io.MultiReader(strings.NewReader(strings.Repeat("x", 10)), strings.NewReader(strings.Repeat("x", 10)))
	if resp := do(http.MethodGet, "/pods", chunked, nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("GET /pods with a 20-byte chunked body: %d, want 413", resp.StatusCode)
	}
	if resp := do(http.MethodGet, "/pods", strings.NewReader("small"), nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /pods with a 5-byte body: %d, want 200", resp.StatusCode)
	}
	// Go reads up to 8 KiB past MaxHeaderBytes on a kept-alive connection.
	huge := http.Header{"X-Huge": {strings.Repeat("h", 64<<10)}}
	if resp := do(http.MethodGet, "/healthz", nil, huge); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("GET /healthz with 64 KiB of headers: %d, want 431", resp.StatusCode)
	}
}

// A keep-alive connection left idle is closed by the server after
// IdleTimeout.
func TestHTTPServerClosesIdleConnections(t *testing.T) {
	addr := serving(t, agent.HTTPConfig{IdleTimeout: 100 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server closed the connection after the response; want keep-alive")
	}
	// A bounded wait for the server's close: far longer than IdleTimeout.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = r.ReadByte()
	if !errors.Is(err, io.EOF) {
		t.Errorf("reading the idle connection: %v, want EOF (closed by the server after IdleTimeout)", err)
	}
}

// runUntilCleanup runs a until the test ends, or until the returned
// stop (which waits for Run) is called, and fails the test if Run returns
// an error.
func runUntilCleanup(t *testing.T, a *agent.Agent) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
