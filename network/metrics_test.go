package network_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/network"
)

func TestMetricsCountOperationsAndErrors(t *testing.T) {
	e := newScriptEnv(t)
	writeFile(t, filepath.Join(e.conf, "10-rec.conflist"), recordConflist, 0o644)
	reg := prometheus.NewPedanticRegistry()
	n, err := network.New(network.Config{ConfDir: e.conf, BinDirs: []string{e.bin}, CacheDir: e.cache,
		Registerer: reg, Clock: clocktesting.NewFakePassiveClock(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := n.SetUp(ctx, pod, "/var/run/netns/x", network.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.SetUp(ctx, pod, "", network.Options{}); err == nil {
		t.Fatal("SetUp without a namespace succeeded")
	}
	if err := n.TearDown(ctx, pod, "/var/run/netns/x", network.Options{}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP kubelet_network_plugin_operations_errors_total Cumulative number of network plugin operation errors by operation type.
# TYPE kubelet_network_plugin_operations_errors_total counter
kubelet_network_plugin_operations_errors_total{operation_type="set_up_pod"} 1
# HELP kubelet_network_plugin_operations_total Cumulative number of network plugin operations by operation type.
# TYPE kubelet_network_plugin_operations_total counter
kubelet_network_plugin_operations_total{operation_type="set_up_pod"} 2
kubelet_network_plugin_operations_total{operation_type="tear_down_pod"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_network_plugin_operations_total", "kubelet_network_plugin_operations_errors_total"); err != nil {
		t.Error(err)
	}
	if got, err := testutil.GatherAndCount(reg, "kubelet_network_plugin_operations_duration_seconds"); err != nil || got != 2 {
		t.Errorf("duration series = %d, %v; want one per operation type", got, err)
	}
	if _, err := network.New(network.Config{Registerer: reg}); err == nil {
		t.Error("registering the metrics twice succeeded")
	}
}
