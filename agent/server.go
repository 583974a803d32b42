package agent

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Handler serves /healthz ("ok", or 500 with the reason), /pods (a
// v1.PodList) and /metrics (Prometheus text from the agent's registry).
// Each path answers GET and HEAD; other methods get 405 with an Allow
// header, and a request body over Config.HTTP.MaxBodyBytes gets 413.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	// A "GET" pattern also matches HEAD; the mux answers other methods
	// 405 with "Allow: GET, HEAD".
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, _ *http.Request) {
		list := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		for _, p := range a.Pods() {
			list.Items = append(list.Items, *p)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&list)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.cfg.Registry, promhttp.HandlerOpts{}))
	return limitBody(a.cfg.HTTP.MaxBodyBytes, mux)
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

// newHTTPServer returns the server Run starts on Config.Listen, bounded by
// cfg.
func newHTTPServer(h http.Handler, cfg HTTPConfig) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
	}
}
