package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/server"
)

// probeRegistries returns a registry of the agent's other metrics and one
// of its prober metrics, one probe counted in each.
func probeRegistries(t *testing.T) (all, probes *prometheus.Registry) {
	t.Helper()
	all, probes = prometheus.NewRegistry(), prometheus.NewRegistry()
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_pleg_relist_total", Help: "h"})
	other.Inc()
	all.MustRegister(other)
	total := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total", Help: "h"},
		[]string{"probe_type", "result", "container", "pod", "namespace"})
	total.WithLabelValues("Liveness", "successful", "app", "web", "ns").Inc()
	probes.MustRegister(total)
	return all, probes
}

// /metrics/probes serves Config.ProbeMetrics alone, on the main handler
// and the read-only one, as the kubelet serves its prober metrics apart
// from /metrics; without ProbeMetrics it is not there.
func TestMetricsProbes(t *testing.T) {
	all, probes := probeRegistries(t)
	srv, err := server.New(server.Config{Pods: newFakeNode(), Metrics: all, ProbeMetrics: probes})
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Handler{"main": srv.Handler(), "read-only": srv.ReadOnlyHandler()} {
		code, body := getHandler(t, h, "/metrics/probes")
		if code != http.StatusOK {
			t.Fatalf("%s /metrics/probes: %d %q", name, code, body)
		}
		if want := `prober_probe_total{container="app",namespace="ns",pod="web",probe_type="Liveness",result="successful"} 1`; !strings.Contains(body, want) {
			t.Errorf("%s /metrics/probes lacks %s:\n%s", name, want, body)
		}
		if strings.Contains(body, "kubelet_pleg") {
			t.Errorf("%s /metrics/probes serves more than the prober metrics:\n%s", name, body)
		}
		if code, body := getHandler(t, h, "/metrics"); code != http.StatusOK || !strings.Contains(body, "kubelet_pleg_relist_total 1") {
			t.Errorf("%s /metrics: %d %q", name, code, body)
		}
	}

	none, err := server.New(server.Config{Pods: newFakeNode(), Metrics: all})
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Handler{"main": none.Handler(), "read-only": none.ReadOnlyHandler()} {
		if code, body := getHandler(t, h, "/metrics/probes"); code != http.StatusNotFound {
			t.Errorf("%s /metrics/probes without Config.ProbeMetrics: %d %q, want 404", name, code, body)
		}
	}
}

// /metrics/probes is authorized as the kubelet authorizes it: verb get on
// nodes/metrics of the node; a client with no right to nodes/metrics is
// refused 403.
func TestMetricsProbesAuthorization(t *testing.T) {
	all, probes := probeRegistries(t)
	authn, err := server.NewAuthenticator(server.AuthenticatorConfig{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	allowMetrics := true
	authz := &recordingAuthorizer{allow: func(a server.Attributes) bool {
		return allowMetrics && a.Subresource == "metrics"
	}}
	srv, err := server.New(server.Config{NodeName: "node-1", Pods: newFakeNode(), Metrics: all, ProbeMetrics: probes,
		Authenticator: authn, Authorizer: authz})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := getHandler(t, srv.Handler(), "/metrics/probes"); code != http.StatusOK || !strings.Contains(body, "prober_probe_total") {
		t.Fatalf("/metrics/probes allowed nodes/metrics: %d %q", code, body)
	}
	if len(authz.asked) != 1 {
		t.Fatalf("authorizer asked %d times, want once: %+v", len(authz.asked), authz.asked)
	}
	want := []server.Attributes{{
		User: authz.asked[0].User, Verb: "get", Resource: "nodes", Name: "node-1", Subresource: "metrics",
		APIVersion: "v1", Path: "/metrics/probes",
	}}
	if d := cmp.Diff(want, authz.asked); d != "" {
		t.Errorf("attributes asked (-want +got):\n%s", d)
	}
	allowMetrics = false
	code, body := getHandler(t, srv.Handler(), "/metrics/probes")
	if code != http.StatusForbidden || !strings.Contains(body, "verb=get, resource=nodes, subresource(s)=[metrics]") {
		t.Errorf("/metrics/probes without nodes/metrics: %d %q, want 403", code, body)
	}
}
