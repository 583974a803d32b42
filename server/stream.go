package server

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// streamOptions are the stdin, stdout, stderr and tty query parameters of
// exec and attach ("1" is on), as the kubelet reads them: with tty,
// stderr is merged into stdout; at least one stream is required.
func streamOptions(r *http.Request) (stdin, stdout, stderr, tty bool, err error) {
	q := r.URL.Query()
	tty = q.Get("tty") == "1"
	stdin = q.Get("stdin") == "1"
	stdout = q.Get("output") == "1" || q.Get("stdout") == "1"
	stderr = q.Get("error") == "1" || q.Get("stderr") == "1"
	if q.Get("input") == "1" {
		stdin = true
	}
	if tty {
		stderr = false
	}
	if !stdin && !stdout && !stderr {
		return false, false, false, false, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return stdin, stdout, stderr, tty, nil
}

// streamTarget finds the pod of the request's path (404 "pod does not
// exist", or "pod not found" for another UID, as the kubelet answers) and
// the runtime's observation of it.
func (s *Server) streamTarget(w http.ResponseWriter, r *http.Request) (*v1.Pod, *runtime.PodStatus, bool) {
	if s.cfg.Streaming == nil || s.cfg.Runtime == nil {
		http.Error(w, "streaming is not served here", http.StatusServiceUnavailable)
		return nil, nil, false
	}
	pod, ok := s.findPod(r.PathValue("namespace"), r.PathValue("pod"), "")
	if !ok {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return nil, nil, false
	}
	if uid := r.PathValue("uid"); uid != "" && string(pod.UID) != uid {
		http.Error(w, "pod not found", http.StatusNotFound)
		return nil, nil, false
	}
	st, err := s.cfg.Runtime.GetPodStatus(r.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return nil, nil, false
	}
	return pod, st, true
}

// runningContainer returns the ID of the running instance of the named
// container, or answers 404 "container not found".
func runningContainer(w http.ResponseWriter, st *runtime.PodStatus, name string) (string, bool) {
	for _, c := range st.ContainerStatuses {
		if c.Name == name && c.State == runtime.ContainerStateRunning {
			return c.ID.ID, true
		}
	}
	http.Error(w, fmt.Sprintf("container not found (%q)", name), http.StatusNotFound)
	return "", false
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	stdin, stdout, stderr, tty, err := streamOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, st, ok := s.streamTarget(w, r)
	if !ok {
		return
	}
	id, ok := runningContainer(w, st, r.PathValue("container"))
	if !ok {
		return
	}
	cmd := r.URL.Query()["command"]
	if len(cmd) == 0 {
		http.Error(w, "exec: no command (the command query parameter)", http.StatusBadRequest)
		return
	}
	resp, err := s.cfg.Streaming.Exec(r.Context(), &runtimeapi.ExecRequest{
		ContainerId: id, Cmd: cmd, Tty: tty, Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	stdin, stdout, stderr, tty, err := streamOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, st, ok := s.streamTarget(w, r)
	if !ok {
		return
	}
	id, ok := runningContainer(w, st, r.PathValue("container"))
	if !ok {
		return
	}
	resp, err := s.cfg.Streaming.Attach(r.Context(), &runtimeapi.AttachRequest{
		ContainerId: id, Tty: tty, Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	pod, st, ok := s.streamTarget(w, r)
	if !ok {
		return
	}
	sb := st.ReadySandbox()
	if sb == nil {
		http.Error(w, fmt.Sprintf("pod %q has no ready sandbox to forward ports to", pod.Name), http.StatusNotFound)
		return
	}
	resp, err := s.cfg.Streaming.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sb.ID})
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

// proxyStream proxies the client's upgraded connection to the runtime's
// streaming URL. The session lasts until either side closes it: the
// server's read and write deadlines are lifted for it.
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, raw string) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		http.Error(w, fmt.Sprintf("the runtime answered a streaming URL that cannot be used: %q", raw), http.StatusInternalServerError)
		return
	}
	if !s.streams.begin() {
		http.Error(w, "the server is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.streams.end()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	h := proxy.NewUpgradeAwareHandler(u, nil, false, true, responder{s})
	h.ServeHTTP(&trackedWriter{ResponseWriter: w, streams: &s.streams}, r)
}

// streams tracks the connections hijacked for streaming sessions, which
// http.Server.Shutdown neither waits for nor closes, so that Serve can
// end them and wait for their handlers.
type streams struct {
	wg sync.WaitGroup
	// mu guards closed and conns.
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

// begin counts a session in, or reports false once closeAll has run.
func (t *streams) begin() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

func (t *streams) end() { t.wg.Done() }

// add records a hijacked connection; after closeAll it closes it at once.
func (t *streams) add(c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = c.Close()
		return
	}
	if t.conns == nil {
		t.conns = map[net.Conn]struct{}{}
	}
	t.conns[c] = struct{}{}
}

func (t *streams) remove(c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, c)
}

// closeAll ends every session and waits for their handlers to return.
func (t *streams) closeAll() {
	t.mu.Lock()
	t.closed = true
	conns := make([]net.Conn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close() // removes itself, under mu
	}
	t.wg.Wait()
}

// trackedWriter records the connection the proxy hijacks.
type trackedWriter struct {
	http.ResponseWriter
	streams *streams
}

func (w *trackedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over for a stream")
	}
	c, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	tc := &trackedConn{Conn: c, streams: w.streams}
	w.streams.add(tc)
	return tc, rw, nil
}

func (w *trackedWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// trackedConn forgets itself when closed.
type trackedConn struct {
	net.Conn
	streams *streams
	once    sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.streams.remove(c) })
	return c.Conn.Close()
}

type responder struct{ s *Server }

func (r responder) Error(w http.ResponseWriter, req *http.Request, err error) {
	r.s.cfg.Logger.V(2).Info("proxying a stream failed", "path", req.URL.Path, "err", err)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// writeRuntimeError answers a CRI error with the HTTP status of its gRPC
// code.
func writeRuntimeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch status.Code(err) {
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.ResourceExhausted:
		code = http.StatusTooManyRequests
	case codes.Unavailable:
		code = http.StatusServiceUnavailable
	case codes.Unimplemented:
		code = http.StatusNotImplemented
	}
	http.Error(w, err.Error(), code)
}
