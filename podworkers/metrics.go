package podworkers

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the pod workers' own; the kubelet has no equivalent.
type metrics struct {
	panics prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodekit_podworkers_sync_panics_total",
			Help: "Panics recovered from the sync handler; each counts as a failed step and is retried.",
		}),
	}
	if reg != nil {
		if err := reg.Register(m.panics); err != nil {
			return nil, fmt.Errorf("podworkers: register metrics: %w", err)
		}
	}
	return m, nil
}
