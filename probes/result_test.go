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

// A runtime.EventFunc configures the Manager as it is: the one event
// function an agent has serves the probes too.
func TestEventsGoToARuntimeEventFunc(t *testing.T) {
	var got []string
	var record runtime.EventFunc = func(pod *v1.Pod, typ, reason, message string) {
		got = append(got, pod.Name+" "+typ+" "+reason+": "+message)
	}
	m, err := probes.New(probes.Config{Status: (&world{}).getStatus, Events: record})
	if err != nil {
		t.Fatal(err)
	}
	m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Readiness: {}}))
	want := "p Warning ProbeWarning: Readiness probe of container c: it has no handler"
	if len(got) != 1 || got[0] != want {
		t.Errorf("events %q, want %q", got, want)
	}
}
