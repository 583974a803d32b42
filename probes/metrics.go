package probes

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// metrics are the kubelet's prober metrics, by its names and labels but
// without the pod UID label (nodekit keeps UIDs out of label values).
type metrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	panics   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober", Name: "probe_total",
			Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober", Name: "probe_duration_seconds",
			Help: "Duration in seconds for a probe response.",
			// The kubelet's leaves its buckets unset: the defaults.
			Buckets: prometheus.DefBuckets,
		}, []string{"probe_type", "container", "pod", "namespace"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodekit_prober_panics_total",
			Help: "Panics recovered from the Prober; each ends its round without a result.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.total, m.duration, m.panics} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("probes: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) observe(pod *v1.Pod, container string, typ Type, r Result, took time.Duration) {
	result := "successful"
	switch r {
	case Failure:
		result = "failed"
	case Unknown:
		result = "unknown"
	}
	m.total.WithLabelValues(string(typ), result, container, pod.Name, pod.Namespace).Inc()
	if r == Failure {
		return // the kubelet times successful and unknown probes only
	}
	m.duration.WithLabelValues(string(typ), container, pod.Name, pod.Namespace).Observe(took.Seconds())
}
