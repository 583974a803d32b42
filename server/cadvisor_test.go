package server_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime/fakecri"
	"github.com/nodekit/nodekit/server"
)

// parseMetrics parses Prometheus text, failing the test on bad syntax.
func parseMetrics(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing metrics: %v\n%s", err, body)
	}
	return fams
}

// series finds the sample of family name whose labels are exactly
// labels, or fails the test listing what there is.
func series(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
	var seen []string
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if cmp.Equal(got, labels) {
			return m
		}
		seen = append(seen, fmt.Sprint(got))
	}
	t.Fatalf("%s has no series %v; it has:\n%s", name, labels, strings.Join(seen, "\n"))
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// cadvisorNode writes a node's /proc (2 CPUs, 8 GB, a mount table that
// puts fakecri's writable layers on /dev/fake1 and the root on
// /dev/root1) and identity files, and returns the CRIStatsConfig for them.
func cadvisorNode(t *testing.T, fake *fakecri.Runtime, clk *clocktesting.FakeClock) server.CRIStatsConfig {
	t.Helper()
	proc, etc := t.TempDir(), t.TempDir()
	stat := "cpu  1000 0 0 5000 70 0 0 0 0 0\ncpu0 500 0 0 2500 0 0 0 0 0 0\ncpu1 500 0 0 2500 70 0 0 0 0 0\nbtime 1767322800\n"
	meminfo := "MemTotal:       8000000 kB\nMemFree:        2000000 kB\nMemAvailable:   5000000 kB\nSwapTotal:      1000 kB\nSwapFree:       600 kB\n"
	mountinfo := "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/root1 rw\n" +
		"40 22 254:2 / /var/lib/fakecri rw,relatime shared:2 - xfs /dev/fake1 rw\n"
	for path, content := range map[string]string{
		"stat": stat, "meminfo": meminfo, "self/mountinfo": mountinfo, "sys/kernel/random/boot_id": "boot-1\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(proc, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"machine-id": "machine-1\n", "product_uuid": "uuid-1\n"} {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return server.CRIStatsConfig{NodeName: "node-1", Runtime: fake, ProcDir: proc, RootDir: "/", Clock: clk,
		MachineIDFile: filepath.Join(etc, "machine-id"), SystemUUIDFile: filepath.Join(etc, "product_uuid")}
}

// /metrics/cadvisor serves, from CRI stats and /proc, cAdvisor's
// metrics by its names, types and labels (container, id, image, name,
// namespace, pod): the machine's size, the node as the root container
// "/", each pod as a container-less series, and each running container,
// its usage samples stamped with the time the runtime read them.
func TestMetricsCadvisorFromCRI(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	fake, err := fakecri.New(fakecri.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	sandboxes := statsPods(t, fake, 1)
	clk.Step(8 * time.Second) // 2 core-seconds at a quarter core
	stats, err := server.NewCRIStats(cadvisorNode(t, fake, clk))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Pods: newFakeNode(), Stats: stats})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := fake.ListContainers(context.Background(), nil)
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers %v %v", cs, err)
	}
	cid := cs[0].GetId()

	for name, h := range map[string]http.Handler{"main": srv.Handler(), "read-only": srv.ReadOnlyHandler()} {
		code, body := getHandler(t, h, "/metrics/cadvisor")
		if code != http.StatusOK {
			t.Fatalf("%s /metrics/cadvisor: %d %q", name, code, body)
		}
		fams := parseMetrics(t, body)
		machine := map[string]string{"machine_id": "machine-1", "system_uuid": "uuid-1", "boot_id": "boot-1"}
		if v := value(series(t, fams, "machine_cpu_cores", machine)); v != 2 {
			t.Errorf("machine_cpu_cores %v, want 2", v)
		}
		if v := value(series(t, fams, "machine_memory_bytes", machine)); v != 8000000*1024 {
			t.Errorf("machine_memory_bytes %v", v)
		}
		app := map[string]string{"container": "app", "id": cid, "image": "busybox", "name": cid, "namespace": "ns", "pod": "pod-0"}
		with := func(m map[string]string, k, v string) map[string]string {
			c := map[string]string{k: v}
			for k, v := range m {
				c[k] = v
			}
			return c
		}
		for _, tc := range []struct {
			family string
			labels map[string]string
			typ    dto.MetricType
			want   float64
			stamp  bool
		}{
			{"container_cpu_usage_seconds_total", with(app, "cpu", "total"), dto.MetricType_COUNTER, 2, true},
			{"container_memory_working_set_bytes", app, dto.MetricType_GAUGE, 100 << 20, true},
			{"container_memory_usage_bytes", app, dto.MetricType_GAUGE, 100 << 20, true},
			{"container_memory_rss", app, dto.MetricType_GAUGE, 100 << 20, true},
			{"container_fs_usage_bytes", with(app, "device", "/dev/fake1"), dto.MetricType_GAUGE, 0, true},
			{"container_start_time_seconds", app, dto.MetricType_GAUGE, float64(t0.Unix()), false},
			// The pod as a whole, as cAdvisor reports a pod's cgroup.
			{"container_memory_working_set_bytes", map[string]string{"container": "", "id": sandboxes[0], "image": "", "name": "", "namespace": "ns", "pod": "pod-0"},
				dto.MetricType_GAUGE, 100 << 20, true},
			// The node as cAdvisor's root container.
			{"container_cpu_usage_seconds_total", map[string]string{"container": "", "id": "/", "image": "", "name": "", "namespace": "", "pod": "", "cpu": "total"},
				dto.MetricType_COUNTER, 10, true},
			{"container_memory_working_set_bytes", map[string]string{"container": "", "id": "/", "image": "", "name": "", "namespace": "", "pod": ""},
				dto.MetricType_GAUGE, 3000000 * 1024, true},
			{"container_memory_swap", map[string]string{"container": "", "id": "/", "image": "", "name": "", "namespace": "", "pod": ""},
				dto.MetricType_GAUGE, 400 * 1024, true},
			{"container_scrape_error", map[string]string{}, dto.MetricType_GAUGE, 0, false},
			{"machine_scrape_error", map[string]string{}, dto.MetricType_GAUGE, 0, false},
		} {
			m := series(t, fams, tc.family, tc.labels)
			if got := fams[tc.family].GetType(); got != tc.typ {
				t.Errorf("%s %s: type %v, want %v", name, tc.family, got, tc.typ)
			}
			if v := value(m); math.Abs(v-tc.want) > 1e-6 {
				t.Errorf("%s %s%v = %v, want %v", name, tc.family, tc.labels, v, tc.want)
			}
			if stamped := m.TimestampMs != nil; stamped != tc.stamp {
				t.Errorf("%s %s%v: timestamp %v, want one: %v", name, tc.family, tc.labels, m.GetTimestampMs(), tc.stamp)
			}
		}
		if ts := series(t, fams, "container_memory_working_set_bytes", app).GetTimestampMs(); ts != clk.Now().UnixMilli() {
			t.Errorf("%s: container sample stamped %d, want the runtime's reading time %d", name, ts, clk.Now().UnixMilli())
		}
		if len(fams["container_fs_usage_bytes"].GetMetric()) != 2 {
			t.Errorf("%s: container_fs_usage_bytes %v, want the node's and the container's", name, fams["container_fs_usage_bytes"].GetMetric())
		}
	}
}

// A pod's network and a container's swap, which fakecri does not give,
// are served when the runtime gives them.
func TestMetricsCadvisorNetworkAndSwap(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	fake, err := fakecri.New(fakecri.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	statsPods(t, fake, 1)
	cfg := cadvisorNode(t, fake, clk)
	cfg.Runtime = richStats{fake}
	stats, err := server.NewCRIStats(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Pods: newFakeNode(), Stats: stats})
	if err != nil {
		t.Fatal(err)
	}
	code, body := getHandler(t, srv.Handler(), "/metrics/cadvisor")
	if code != http.StatusOK {
		t.Fatalf("/metrics/cadvisor: %d %q", code, body)
	}
	fams := parseMetrics(t, body)
	for _, fam := range []string{"container_network_receive_bytes_total", "container_network_transmit_bytes_total", "container_network_receive_errors_total", "container_network_transmit_errors_total"} {
		f := fams[fam]
		if f.GetType() != dto.MetricType_COUNTER || len(f.GetMetric()) != 1 {
			t.Fatalf("%s: %v", fam, f)
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["interface"] != "eth0" || labels["pod"] != "pod-0" || labels["container"] != "" {
			t.Errorf("%s labels %v, want the pod's eth0", fam, labels)
		}
	}
	if v := value(fams["container_network_receive_bytes_total"].GetMetric()[0]); v != 1234 {
		t.Errorf("received %v bytes, want 1234", v)
	}
	if f := fams["container_memory_swap"]; len(f.GetMetric()) != 2 || !slices.ContainsFunc(f.GetMetric(), func(m *dto.Metric) bool { return value(m) == 4096 }) {
		t.Errorf("container_memory_swap %v, want the node's and the container's 4096", f.GetMetric())
	}

	code, body = getHandler(t, srv.Handler(), "/metrics/resource")
	fams = parseMetrics(t, body)
	app := map[string]string{"container": "app", "namespace": "ns", "pod": "pod-0"}
	if code != 200 || value(series(t, fams, "container_swap_usage_bytes", app)) != 4096 || value(series(t, fams, "container_swap_limit_bytes", app)) != 4096+1024 ||
		value(series(t, fams, "pod_swap_usage_bytes", map[string]string{"namespace": "ns", "pod": "pod-0"})) != 4096 ||
		value(series(t, fams, "node_swap_usage_bytes", map[string]string{})) != 400*1024 {
		t.Errorf("/metrics/resource swap:\n%s", body)
	}
}

// richStats adds a network to each sandbox's stats and swap to each
// container's, as containerd gives them.
type richStats struct{ *fakecri.Runtime }

func (r richStats) ListPodSandboxStats(ctx context.Context, f *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	out, err := r.Runtime.ListPodSandboxStats(ctx, f)
	for _, ps := range out {
		ps.Linux.Network = &runtimeapi.NetworkUsage{Timestamp: 1, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{
			Name: "eth0", RxBytes: &runtimeapi.UInt64Value{Value: 1234}, RxErrors: &runtimeapi.UInt64Value{},
			TxBytes: &runtimeapi.UInt64Value{Value: 99}, TxErrors: &runtimeapi.UInt64Value{},
		}}
		ps.Linux.Network.Interfaces = []*runtimeapi.NetworkInterfaceUsage{ps.Linux.Network.DefaultInterface}
		for _, c := range ps.Linux.Containers {
			c.Swap = &runtimeapi.SwapUsage{Timestamp: 1, SwapUsageBytes: &runtimeapi.UInt64Value{Value: 4096}, SwapAvailableBytes: &runtimeapi.UInt64Value{Value: 1024}}
		}
	}
	return out, err
}

// /metrics/cadvisor is authorized as nodes/metrics; a runtime that fails
// is container_scrape_error 1; a StatsProvider without ContainerStats
// has no /metrics/cadvisor.
func TestMetricsCadvisorAuthorizationAndErrors(t *testing.T) {
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := server.NewCRIStats(server.CRIStatsConfig{NodeName: "node-1", Runtime: fake, ProcDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	authn, err := server.NewAuthenticator(server.AuthenticatorConfig{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	allowMetrics := true
	authz := &recordingAuthorizer{allow: func(a server.Attributes) bool { return allowMetrics && a.Subresource == "metrics" }}
	srv, err := server.New(server.Config{NodeName: "node-1", Pods: newFakeNode(), Stats: stats, Authenticator: authn, Authorizer: authz})
	if err != nil {
		t.Fatal(err)
	}
	code, body := getHandler(t, srv.Handler(), "/metrics/cadvisor")
	if code != http.StatusOK || !strings.Contains(body, "container_scrape_error 0") {
		t.Fatalf("/metrics/cadvisor allowed nodes/metrics: %d %q", code, body)
	}
	if strings.Contains(body, "machine_cpu_cores") || !strings.Contains(body, "machine_scrape_error 1") {
		t.Errorf("/metrics/cadvisor without /proc serves machine figures, or no error for them:\n%s", body)
	}
	want := []server.Attributes{{User: authz.asked[0].User, Verb: "get", Resource: "nodes", Name: "node-1", Subresource: "metrics", APIVersion: "v1", Path: "/metrics/cadvisor"}}
	if d := cmp.Diff(want, authz.asked); d != "" {
		t.Errorf("attributes asked (-want +got):\n%s", d)
	}
	allowMetrics = false
	if code, body := getHandler(t, srv.Handler(), "/metrics/cadvisor"); code != http.StatusForbidden || !strings.Contains(body, "subresource(s)=[metrics]") {
		t.Errorf("/metrics/cadvisor without nodes/metrics: %d %q, want 403", code, body)
	}
	allowMetrics = true
	fake.InjectError("ListPodSandbox", errors.New("runtime down"))
	if code, body := getHandler(t, srv.Handler(), "/metrics/cadvisor"); code != http.StatusOK || !strings.Contains(body, "container_scrape_error 1") {
		t.Errorf("/metrics/cadvisor with a failing runtime: %d %q", code, body)
	}

	summaryOnly, err := server.New(server.Config{Pods: newFakeNode(), Stats: fixedSummary{}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := getHandler(t, summaryOnly.Handler(), "/metrics/cadvisor"); code != http.StatusNotFound {
		t.Errorf("/metrics/cadvisor of a summary-only StatsProvider: %d, want 404", code)
	}
}
