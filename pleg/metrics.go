package pleg

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the kubelet's PLEG metrics, by the kubelet's names.
type metrics struct {
	relistDuration prometheus.Histogram
	relistInterval prometheus.Histogram
	lastSeen       prometheus.Gauge
	discarded      prometheus.Counter
	pods           prometheus.Gauge
	panics         prometheus.Counter

	last time.Time // the previous relist's start, for the interval
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		relistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_duration_seconds",
			Help:    "Duration in seconds for relisting pods in PLEG.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		relistInterval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_interval_seconds",
			Help:    "Interval in seconds between relisting in PLEG.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		lastSeen: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "pleg_last_seen_seconds",
			Help: "Timestamp in seconds when PLEG was last seen active.",
		}),
		discarded: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "pleg_discard_events",
			Help: "The number of discard events in PLEG.",
		}),
		pods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodekit_pleg_pods", Help: "Pods seen by the last relist.",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodekit_pleg_runtime_panics_total",
			Help: "Panics recovered from runtime calls of the PLEG (a list, an inspection, the event stream); each counts as the call's error.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.relistDuration, m.relistInterval, m.lastSeen, m.discarded, m.pods, m.panics} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("pleg: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) observe(start time.Time, took time.Duration, pods int) {
	m.relistDuration.Observe(took.Seconds())
	if !m.last.IsZero() {
		m.relistInterval.Observe(start.Sub(m.last).Seconds())
	}
	m.last = start
	m.lastSeen.Set(float64(start.Unix()))
	m.pods.Set(float64(pods))
}
