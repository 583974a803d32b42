package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
)

// After a probe has run on fakecri, the agent's /metrics/probes serves
// prober_probe_total for it, by the kubelet's labels, and nothing but
// the prober metrics, on the main and the read-only handler.
func TestAgentServesMetricsProbes(t *testing.T) {
	dir := manifestDir(t)
	if err := os.WriteFile(filepath.Join(dir, "probed.yaml"), []byte(probedPod), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := newFake(t)
	src, _ := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "node"})
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{src},
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "..", "logs"), PodsDir: filepath.Join(dir, "..", "pods"), ResolvConf: "-"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	r := &running{t: t, a: a}

	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	var want string
	eventually(t, "a successful readiness probe is counted", func() bool {
		p := r.pod("probed")
		if p == nil {
			return false
		}
		want = fmt.Sprintf(`prober_probe_total{container="app",namespace=%q,pod=%q,probe_type="Readiness",result="successful"}`, p.Namespace, p.Name)
		_, body := get(a.Handler(), "/metrics/probes")
		return strings.Contains(body, want)
	})
	for name, h := range map[string]http.Handler{"main": a.Handler(), "read-only": a.ReadOnlyHandler()} {
		code, body := get(h, "/metrics/probes")
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s /metrics/probes: %d, want 200 with %s:\n%s", name, code, want, body)
		}
		for _, line := range strings.Split(body, "\n") {
			if line == "" || strings.HasPrefix(line, "# ") && strings.Contains(line, " prober_") {
				continue
			}
			if !strings.HasPrefix(line, "prober_probe_total{") && !strings.HasPrefix(line, "prober_probe_duration_seconds_") {
				t.Errorf("%s /metrics/probes serves more than the prober metrics: %q", name, line)
			}
		}
		if !strings.Contains(body, "prober_probe_duration_seconds_count{") {
			t.Errorf("%s /metrics/probes has no prober_probe_duration_seconds:\n%s", name, body)
		}
	}
	if _, body := get(a.Handler(), "/metrics"); !strings.Contains(body, "kubelet_pleg_relist_duration_seconds") {
		t.Errorf("/metrics lacks the agent's other metrics:\n%.2000s", body)
	}
}
