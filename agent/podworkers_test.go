package agent_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// An edited manifest replaces its static pod by one with a new UID and the
// same name, which starts only once the old pod is gone. When the old
// pod's kill fails once, the worker retries it after the back-off, though
// the old spec is already gone from the desired pods; then the
// replacement starts.
func TestReplacementStartsAfterTheOldPodsKillFailedOnce(t *testing.T) {
	dir := manifestDir(t)
	writeManifest(t, dir, "web", "Always", "VERSION", "1")
	r := start(t, newFake(t), dir)
	eventually(t, "web runs", func() bool { return r.phase("web") == v1.PodRunning })
	oldUID := r.pod("web").UID

	r.fake.InjectError("StopPodSandbox", errors.New("injected sandbox stop failure"))
	writeManifest(t, dir, "web", "Always", "VERSION", "2")
	eventuallyShowing(t, "the replacement runs", func() bool {
		p := r.pod("web")
		return p != nil && p.UID != oldUID && p.Status.Phase == v1.PodRunning
	}, func() string {
		var seen []string
		for _, p := range r.a.Pods() {
			seen = append(seen, fmt.Sprintf("%s %s %s", p.Name, p.UID, p.Status.Phase))
		}
		return strings.Join(seen, "\n") + fmt.Sprintf("\nStopPodSandbox calls: %d", countCalls(r.fake, "StopPodSandbox"))
	})
	if n := countCalls(r.fake, "StopPodSandbox"); n < 2 {
		t.Errorf("StopPodSandbox called %d times, want the failed call and its retry", n)
	}
}

// The pod workers' panic counter is on the agent's /metrics.
func TestMetricsListPodWorkerPanics(t *testing.T) {
	r := start(t, newFake(t), manifestDir(t))
	rec := httptest.NewRecorder()
	r.a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "nodekit_podworkers_sync_panics_total 0") {
		t.Errorf("/metrics lacks nodekit_podworkers_sync_panics_total:\n%s", rec.Body.String())
	}
}
