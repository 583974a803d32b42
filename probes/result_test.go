package probes_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/probes"
	"github.com/nodekit/nodekit/runtime"
)

// The Manager's results are runtime.ProbeResult values, by name: what a
// runtime reads needs no conversion.
func TestResultsAreRuntimeProbeResults(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Failure)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Liveness: probe(10, 1, 1, 0)}))
	e.next(10 * time.Second) // the initial success
	u := e.next(10 * time.Second)
	var got runtime.ProbeResult = e.m.Liveness("fake://a")
	if got != runtime.ProbeFailure || u.Result != runtime.ProbeFailure {
		t.Errorf("Liveness() = %v, update %v, want runtime.ProbeFailure", got, u.Result)
	}
	for r, want := range map[probes.Result]runtime.ProbeResult{probes.Unknown: runtime.ProbeUnknown, probes.Success: runtime.ProbeSuccess, probes.Failure: runtime.ProbeFailure} {
		if r != want || r.String() != want.String() {
			t.Errorf("probes.%v is not runtime's %v", r, want)
		}
	}
}
