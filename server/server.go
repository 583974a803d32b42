package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Server is the node's HTTP API. It holds no goroutine of its own: Handler
// serves requests on the caller's server, and Serve runs one until its
// context ends. Safe for concurrent use.
type Server struct {
	cfg     Config
	h       http.Handler
	ro      http.Handler // ReadOnlyHandler's
	streams streams      // the sessions of /exec, /attach and /portForward
}

// New builds a Server from cfg. It does no I/O and starts nothing. It
// fails when Config.Pods is missing, or an Authorizer is set without an
// Authenticator or a NodeName.
func New(cfg Config) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg}
	mux := http.NewServeMux()
	// A "GET" pattern also matches HEAD; the mux answers other methods
	// 405 with "Allow: GET, HEAD".
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /pods", s.pods)
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /runningpods/", s.runningPods)
	mux.HandleFunc("GET /configz", s.configz)
	mux.HandleFunc("GET /stats/summary", s.statsSummary)
	mux.HandleFunc("GET /metrics/resource", s.metricsResource)
	if _, ok := cfg.Stats.(ContainerStatsProvider); ok {
		mux.HandleFunc("GET /metrics/cadvisor", s.metricsCadvisor)
	}
	if cfg.ProbeMetrics != nil {
		mux.Handle("GET /metrics/probes", promhttp.HandlerFor(cfg.ProbeMetrics, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	for _, m := range []string{"GET", "POST"} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", s.exec)
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", s.exec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", s.attach)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", s.attach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", s.portForward)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", s.portForward)
	}
	var h http.Handler = mux
	if cfg.Authenticator != nil {
		h = s.authFilter(h)
	}
	s.h = limitBody(cfg.HTTP.MaxBodyBytes, h)

	// The kubelet's read-only port: what it serves without credentials,
	// and the debugging paths refused as it refuses them there.
	ro := http.NewServeMux()
	ro.HandleFunc("GET /healthz", s.healthz)
	ro.HandleFunc("GET /pods", s.pods)
	ro.Handle("GET /metrics", promhttp.HandlerFor(cfg.Metrics, promhttp.HandlerOpts{}))
	ro.HandleFunc("GET /stats/summary", s.statsSummary)
	ro.HandleFunc("GET /metrics/resource", s.metricsResource)
	if _, ok := cfg.Stats.(ContainerStatsProvider); ok {
		ro.HandleFunc("GET /metrics/cadvisor", s.metricsCadvisor)
	}
	if cfg.ProbeMetrics != nil {
		ro.Handle("GET /metrics/probes", promhttp.HandlerFor(cfg.ProbeMetrics, promhttp.HandlerOpts{}))
	}
	for _, p := range []string{"/run/", "/exec/", "/attach/", "/portForward/", "/containerLogs/", "/runningpods/", "/logs/", "/debug/pprof/"} {
		ro.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "Debug endpoints are disabled.", http.StatusMethodNotAllowed)
		})
	}
	s.ro = limitBody(cfg.HTTP.MaxBodyBytes, ro)
	return s, nil
}

// Handler returns the server's handler: /healthz, /pods, /metrics,
// /metrics/probes (with Config.ProbeMetrics), /runningpods/, /configz,
// /stats/summary, /metrics/resource, /metrics/cadvisor (with a
// ContainerStatsProvider), /containerLogs, /exec, /attach and
// /portForward, behind authentication and authorization when configured.
// A request body over Config.HTTP.MaxBodyBytes is answered 413.
func (s *Server) Handler() http.Handler { return s.h }

// ReadOnlyHandler returns the handler of the kubelet's read-only port
// (readOnlyPort): /healthz, /pods, /metrics, /metrics/probes (with
// Config.ProbeMetrics), /stats/summary, /metrics/resource and
// /metrics/cadvisor (with a ContainerStatsProvider), to every
// client, without authentication or authorization even when Config has
// them. Nothing there changes the node
// or opens a stream: /run, /exec, /attach, /portForward, /containerLogs,
// /runningpods/, /logs and /debug/pprof answer 405 "Debug endpoints are
// disabled.", as the kubelet's do, and /configz is not there (404). Serve it with
// NewHTTPServer on a listener of its own, plain HTTP.
func (s *Server) ReadOnlyHandler() http.Handler { return s.ro }

// NewHTTPServer returns an http.Server for h bounded by cfg (zero fields
// defaulted): timeouts and header size.
func NewHTTPServer(h http.Handler, cfg HTTPConfig) *http.Server {
	cfg = cfg.Defaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
	}
}

// Serve serves Handler on lis until ctx ends, over TLS when tlsConfig is
// not nil (see TLSConfig), bounded by Config.HTTP. It blocks; when ctx
// ends it shuts the server down: a followed log ends with ctx, requests in
// flight get up to 5s, exec, attach and port-forward sessions are cut, and
// it returns nil once their handlers have returned. It closes lis. Call
// it once: after it returns, the server takes no new streaming session.
func (s *Server) Serve(ctx context.Context, lis net.Listener, tlsConfig *tls.Config) error {
	srv := NewHTTPServer(s.h, s.cfg.HTTP)
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	if tlsConfig != nil {
		lis = tls.NewListener(lis, tlsConfig)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case err := <-done:
		return fmt.Errorf("server: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		err = srv.Close()
	}
	s.streams.closeAll() // Shutdown leaves hijacked connections alone
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("server: serve: %w", serr)
	}
	return err
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if err := s.cfg.Healthy(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

func (s *Server) pods(w http.ResponseWriter, _ *http.Request) {
	// A v1.PodList written one item at a time: memory is bounded by one
	// pod's encoding, not the whole list's (megabytes at 1000 pods).
	pods := s.cfg.Pods.Pods()
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = bw.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":`)
	if len(pods) == 0 {
		_, _ = bw.WriteString("null") // a nil Items, as json.Marshal writes it
	}
	enc := json.NewEncoder(bw)
	for i, p := range pods {
		sep := byte(',')
		if i == 0 {
			sep = '['
		}
		_ = bw.WriteByte(sep)
		if err := enc.Encode(p); err != nil {
			// A v1.Pod always encodes; the status line is sent, so
			// end the body short, which the client sees as invalid.
			return
		}
	}
	if len(pods) > 0 {
		_ = bw.WriteByte(']')
	}
	_ = bw.WriteByte('}')
	_ = bw.Flush()
}

// runningPods answers the runtime's running pods as a v1.PodList whose
// items carry only names, UIDs and their containers' names and images, as
// the kubelet's /runningpods/.
func (s *Server) runningPods(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Runtime == nil {
		http.Error(w, "the runtime is not served here", http.StatusServiceUnavailable)
		return
	}
	pods, err := s.cfg.Runtime.GetPods(r.Context(), false)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	list := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, p := range pods {
		pod := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.ID}}
		for _, c := range p.Containers {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c.Name, Image: c.Image})
		}
		list.Items = append(list.Items, pod)
	}
	writeJSON(w, &list)
}

func (s *Server) configz(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Configz == nil {
		http.NotFound(w, nil)
		return
	}
	v, err := s.cfg.Configz()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, map[string]any{"kubeletconfig": v})
}

// findPod returns the node's pod namespace/name, and with a uid given, of
// that UID.
func (s *Server) findPod(namespace, name, uid string) (*v1.Pod, bool) {
	if g, ok := s.cfg.Pods.(PodGetter); ok {
		p, ok := g.PodByName(namespace, name)
		if !ok || (uid != "" && string(p.UID) != uid) {
			return nil, false
		}
		return p, true
	}
	for _, p := range s.cfg.Pods.Pods() {
		if p.Namespace == namespace && p.Name == name && (uid == "" || string(p.UID) == uid) {
			return p, true
		}
	}
	return nil, false
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// limitBody answers 413 to a request whose body is over max bytes, before
// next sees it; a body within the limit is read and dropped (no endpoint
// takes one), so a chunked body cannot slip past the limit either.
func limitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			w.Header().Set("Connection", "close")
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			_, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, max))
			if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			if err != nil {
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
