package volumes

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the kubelet's volume metrics, by its names.
type metrics struct {
	// storage_operation_duration_seconds{volume_plugin, operation_name,
	// status, migrated}: operation_name volume_mount or volume_unmount,
	// status success or fail-unknown, migrated always "false".
	opDuration *prometheus.HistogramVec
}

func newMetrics(m *Manager, reg prometheus.Registerer) (*metrics, error) {
	mx := &metrics{
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "storage_operation_duration_seconds",
			Help:    "Storage operation duration",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600},
		}, []string{"volume_plugin", "operation_name", "status", "migrated"}),
	}
	if reg == nil {
		return mx, nil
	}
	for _, c := range []prometheus.Collector{mx.opDuration, totalVolumes{m}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return mx, nil
}

func (mx *metrics) observe(plugin, op string, err error, d time.Duration) {
	status := "success"
	if err != nil {
		status = "fail-unknown"
	}
	mx.opDuration.WithLabelValues(plugin, op, status, "false").Observe(d.Seconds())
}

// totalVolumes is the kubelet's volume_manager_total_volumes{plugin_name,
// state}: the volumes in the desired state (desired_state_of_world) and
// those set up (actual_state_of_world), by plugin, counted at each
// scrape.
type totalVolumes struct{ m *Manager }

var totalVolumesDesc = prometheus.NewDesc("volume_manager_total_volumes", "Number of volumes in Volume Manager", []string{"plugin_name", "state"}, nil)

func (totalVolumes) Describe(ch chan<- *prometheus.Desc) { ch <- totalVolumesDesc }

func (t totalVolumes) Collect(ch chan<- prometheus.Metric) {
	type key struct{ plugin, state string }
	counts := map[key]int{}
	t.m.mu.Lock()
	for _, ps := range t.m.pods {
		for _, vs := range ps.vols {
			if vs.wanted {
				counts[key{vs.plugin.Name(), "desired_state_of_world"}]++
			}
			if vs.mounted {
				counts[key{vs.plugin.Name(), "actual_state_of_world"}]++
			}
		}
	}
	t.m.mu.Unlock()
	for _, p := range t.m.cfg.Plugins {
		for _, state := range []string{"desired_state_of_world", "actual_state_of_world"} {
			ch <- prometheus.MustNewConstMetric(totalVolumesDesc, prometheus.GaugeValue, float64(counts[key{p.Name(), state}]), p.Name(), state)
		}
	}
}
