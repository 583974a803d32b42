package agent_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// phaseOf returns the phase of the named pod in a.Pods(), "" if absent.
func phaseOf(r *running, name string) v1.PodPhase {
	for _, p := range r.a.Pods() {
		if p.Name == name+"-node" {
			return p.Status.Phase
		}
	}
	return ""
}

func TestPodChangesSignalStatusChanges(t *testing.T) {
	dir := manifestDir(t)
	r := start(t, newFake(t), dir)
	changes, cancel := r.a.PodChanges()
	defer cancel()

	writeManifest(t, dir, "web", "Always")
	// Each signal is followed by a read of Pods; the pod must reach
	// Running through signals alone.
	deadline := time.After(20 * time.Second)
	for phaseOf(r, "web") != v1.PodRunning {
		select {
		case _, ok := <-changes:
			if !ok {
				t.Fatal("the channel closed before cancel")
			}
		case <-deadline:
			t.Fatalf("web is %q after 20s of signals, want Running", phaseOf(r, "web"))
		}
	}

	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	for phaseOf(r, "web") != "" {
		select {
		case <-changes:
		case <-deadline:
			t.Fatalf("web is still listed (%q) 20s after its manifest went", phaseOf(r, "web"))
		}
	}
	cancel()
	for range changes { // drains a pending value; ends because cancel closed it
	}
}
