package network

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Operation types of the metrics, the labels the kubelet's CNI network
// plugin used ("check_pod" is this package's own: the kubelet never ran
// CHECK).
const (
	opSetUp    = "set_up_pod"
	opTearDown = "tear_down_pod"
	opCheck    = "check_pod"
)

// metrics are the kubelet's network plugin metrics, by its names (from
// the kubelet's CNI network plugin, removed with dockershim), so existing
// dashboards keep working.
type metrics struct {
	// kubelet_network_plugin_operations_duration_seconds{operation_type}
	duration *prometheus.HistogramVec
	// kubelet_network_plugin_operations_total{operation_type}
	total *prometheus.CounterVec
	// kubelet_network_plugin_operations_errors_total{operation_type}
	errors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	mx := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubelet_network_plugin_operations_duration_seconds",
			Help:    "Latency in seconds of network plugin operations. Broken down by operation type.",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation_type"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_network_plugin_operations_total",
			Help: "Cumulative number of network plugin operations by operation type.",
		}, []string{"operation_type"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_network_plugin_operations_errors_total",
			Help: "Cumulative number of network plugin operation errors by operation type.",
		}, []string{"operation_type"}),
	}
	if reg == nil {
		return mx, nil
	}
	for _, c := range []prometheus.Collector{mx.duration, mx.total, mx.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return mx, nil
}

func (mx *metrics) observe(op string, err error, d time.Duration) {
	mx.total.WithLabelValues(op).Inc()
	mx.duration.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		mx.errors.WithLabelValues(op).Inc()
	}
}
