package agent

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHTTPServerIsBoundedByDefault(t *testing.T) {
	cfg := HTTPConfig{}.Defaults()
	srv := newHTTPServer(http.NotFoundHandler(), cfg)
	got := HTTPConfig{
		ReadHeaderTimeout: srv.ReadHeaderTimeout, ReadTimeout: srv.ReadTimeout, WriteTimeout: srv.WriteTimeout,
		IdleTimeout: srv.IdleTimeout, MaxHeaderBytes: srv.MaxHeaderBytes, MaxBodyBytes: cfg.MaxBodyBytes,
	}
	want := HTTPConfig{
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute,
		IdleTimeout: 90 * time.Second, MaxHeaderBytes: 64 << 10, MaxBodyBytes: 4 << 10,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("server bounds (-want +got):\n%s", d)
	}
}
