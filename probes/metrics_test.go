package probes_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/probes"
)

// prober_probe_duration_seconds is the kubelet's histogram: its name,
// labels and buckets (the Prometheus defaults, which the kubelet's
// leaves unset), so that dashboards over the kubelet's buckets work.
func TestDurationHistogramIsTheKubelets(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Success)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(10, 3, 1, 0)}))
	e.next(10 * time.Second) // the failure before the first probe
	if u := e.next(10 * time.Second); u.Result != probes.Success {
		t.Fatalf("after a successful probe: %+v", u)
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, mf := range mfs {
		if mf.GetName() != "prober_probe_duration_seconds" {
			continue
		}
		found = true
		if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetHistogram() == nil {
			t.Fatalf("prober_probe_duration_seconds: %v, want one histogram", mf)
		}
		m := mf.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if d := cmp.Diff(map[string]string{"probe_type": "Readiness", "container": "c", "pod": "p", "namespace": "ns"}, labels); d != "" {
			t.Errorf("labels (-want +got):\n%s", d)
		}
		var bounds []float64
		for _, b := range m.GetHistogram().GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		if d := cmp.Diff(prometheus.DefBuckets, bounds); d != "" {
			t.Errorf("buckets (-want +got):\n%s", d)
		}
		if m.GetHistogram().GetSampleCount() != 1 {
			t.Errorf("%d probes observed, want 1", m.GetHistogram().GetSampleCount())
		}
	}
	if !found {
		t.Error("no prober_probe_duration_seconds")
	}
}

// As the kubelet's, the duration histogram times successful and unknown
// probes, not failed ones; the counter counts every result.
func TestFailedProbesAreCountedNotTimed(t *testing.T) {
	e := newEnv(t)
	e.w.running("fake://a", t0)
	e.w.script(probes.Success, probes.Failure)
	e.m.AddPod(pod(map[probes.Type]*v1.Probe{probes.Readiness: probe(10, 1, 1, 0)}))
	e.next(10 * time.Second) // the failure before the first probe
	if u := e.next(10 * time.Second); u.Result != probes.Success {
		t.Fatalf("after a successful probe: %+v", u)
	}
	if u := e.next(10 * time.Second); u.Result != probes.Failure {
		t.Fatalf("after a failed probe: %+v", u)
	}
	if n := testutil.CollectAndCount(e.reg, "prober_probe_total"); n != 2 {
		t.Errorf("%d prober_probe_total series, want the successful and the failed one", n)
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "prober_probe_duration_seconds" {
			if n := mf.GetMetric()[0].GetHistogram().GetSampleCount(); n != 1 {
				t.Errorf("%d probes timed, want 1: the failed one is not", n)
			}
		}
	}
}
