package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/server"
)

// fixedSummary is a StatsProvider of one fixed Summary.
type fixedSummary struct{ sum *statsapi.Summary }

func (f fixedSummary) Summary(context.Context) (*statsapi.Summary, error) { return f.sum, nil }

// /metrics/resource is the kubelet's, to the byte: names, help texts
// with their stability level, types, labels, and the reading time of each
// usage sample, which metrics-server computes CPU rates from; a
// container's start time carries none.
func TestMetricsResourceAsTheKubelets(t *testing.T) {
	at := metav1.NewTime(t0)
	u := func(v uint64) *uint64 { return &v }
	sum := &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node-1",
			CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u(15e9)},
			Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: u(3000)},
			Swap:   &statsapi.SwapStats{Time: at, SwapUsageBytes: u(10)},
		},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Name: "web", Namespace: "ns", UID: "uid-1"},
			CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u(2e9)},
			Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: u(200)},
			Containers: []statsapi.ContainerStats{{
				Name: "app", StartTime: metav1.NewTime(t0.Add(-time.Minute)),
				CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u(1e9)},
				Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: u(100)},
			}},
		}},
	}
	srv, err := server.New(server.Config{Pods: newFakeNode(), Stats: fixedSummary{sum}})
	if err != nil {
		t.Fatal(err)
	}
	code, body := getHandler(t, srv.Handler(), "/metrics/resource")
	ms := t0.UnixMilli()
	want := fmt.Sprintf(`# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="ns",pod="web"} 1 %[1]d
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="ns",pod="web"} 100 %[1]d
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="ns",pod="web"} %[2]v
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 15 %[1]d
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 3000 %[1]d
# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems
# TYPE node_swap_usage_bytes gauge
node_swap_usage_bytes 10 %[1]d
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="ns",pod="web"} 2 %[1]d
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="ns",pod="web"} 200 %[1]d
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`, ms, float64(t0.Add(-time.Minute).Unix()))
	if code != http.StatusOK {
		t.Fatalf("/metrics/resource: %d %q", code, body)
	}
	if d := cmp.Diff(want, body); d != "" {
		t.Errorf("/metrics/resource (-want +got):\n%s", d)
	}
}
