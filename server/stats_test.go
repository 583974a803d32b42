package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime/fakecri"
	"github.com/nodekit/nodekit/server"
)

// statsNode starts n pods in fake, each with one container "app" using
// 100 MiB and a quarter core, and returns their sandbox IDs.
func statsPods(t testing.TB, fake *fakecri.Runtime, n int) []string {
	t.Helper()
	ctx := context.Background()
	fake.Script(fakecri.Match{Container: "app"}, fakecri.Behavior{MemoryBytes: 100 << 20, CPUNanoCores: 250_000_000})
	var ids []string
	for i := range n {
		cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("pod-%d", i), Namespace: "ns", Uid: fmt.Sprintf("uid-%d", i)}}
		sb, err := fake.RunPodSandbox(ctx, cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := fake.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, cfg); err != nil {
				t.Fatal(err)
			}
		}
		id, err := fake.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := fake.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb)
	}
	return ids
}

func writeProc(t testing.TB, dir string, busyJiffies int) {
	t.Helper()
	// user nice system idle iowait irq softirq steal: busy = user+nice+system+irq+softirq+steal.
	stat := fmt.Sprintf("cpu  %d 0 0 5000 70 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\nbtime 1767322800\n", busyJiffies)
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	meminfo := "MemTotal:       8000000 kB\nMemFree:        2000000 kB\nMemAvailable:   5000000 kB\n"
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte(meminfo), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestStatsSummaryFromCRIAndProc(t *testing.T) {
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ids := statsPods(t, fake, 2)
	if err := fake.StopPodSandbox(context.Background(), ids[1]); err != nil {
		t.Fatal(err)
	}
	proc := t.TempDir()
	writeProc(t, proc, 1000)
	clk := clocktesting.NewFakeClock(t0)
	stats, err := server.NewCRIStats(server.CRIStatsConfig{NodeName: "node-1", Runtime: fake, ProcDir: proc, RootDir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Pods: newFakeNode(), Stats: stats})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	summary := func(q string) statsapi.Summary {
		t.Helper()
		code, body := get(t, ts.URL+"/stats/summary"+q)
		var s statsapi.Summary
		if err := json.Unmarshal([]byte(body), &s); code != 200 || err != nil {
			t.Fatalf("/stats/summary: %d %q %v", code, body, err)
		}
		return s
	}
	s := summary("")
	n := s.Node
	if n.NodeName != "node-1" || n.CPU == nil || *n.CPU.UsageCoreNanoSeconds != 1000*1e7 || n.CPU.UsageNanoCores != nil {
		t.Errorf("node cpu %+v, want 10s of core time and no rate yet", n.CPU)
	}
	if n.Memory == nil || *n.Memory.WorkingSetBytes != 3000000*1024 || *n.Memory.AvailableBytes != 5000000*1024 || *n.Memory.UsageBytes != 6000000*1024 {
		t.Errorf("node memory %+v", n.Memory)
	}
	if n.Fs == nil || n.Fs.CapacityBytes == nil || *n.Fs.CapacityBytes == 0 || n.StartTime.Unix() != 1767322800 {
		t.Errorf("node fs %+v, start %v", n.Fs, n.StartTime)
	}
	if len(s.Pods) != 1 {
		t.Fatalf("pods %+v, want only the ready one", s.Pods)
	}
	p := s.Pods[0]
	if p.PodRef != (statsapi.PodReference{Name: "pod-0", Namespace: "ns", UID: "uid-0"}) || *p.Memory.WorkingSetBytes != 100<<20 ||
		*p.CPU.UsageNanoCores != 250_000_000 || len(p.Containers) != 1 || p.Containers[0].Name != "app" || *p.Containers[0].Memory.WorkingSetBytes != 100<<20 {
		t.Errorf("pod %+v", p)
	}

	// A second summary 10s later, after 5 more core-seconds: half a core.
	writeProc(t, proc, 1500)
	clk.Step(10 * time.Second)
	s = summary("?only_cpu_and_memory=true")
	if s.Node.CPU.UsageNanoCores == nil || *s.Node.CPU.UsageNanoCores != 500_000_000 {
		t.Errorf("node cpu rate %v, want 500000000", s.Node.CPU.UsageNanoCores)
	}
	if s.Node.Fs != nil || s.Pods[0].Containers[0].Rootfs != nil {
		t.Error("only_cpu_and_memory kept filesystem figures")
	}

	code, body := get(t, ts.URL+"/metrics/resource")
	for _, want := range []string{
		"node_cpu_usage_seconds_total 15",
		"node_memory_working_set_bytes 3.072e+09",
		`pod_memory_working_set_bytes{namespace="ns",pod="pod-0"} 1.048576e+08`,
		`container_memory_working_set_bytes{container="app",namespace="ns",pod="pod-0"} 1.048576e+08`,
		`container_cpu_usage_seconds_total{container="app",namespace="ns",pod="pod-0"}`,
		"resource_scrape_error 0",
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics/resource: %d, missing %q in\n%s", code, want, body)
		}
	}
}

func TestStatsErrors(t *testing.T) {
	srv, err := server.New(server.Config{Pods: newFakeNode()})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := getHandler(t, srv.Handler(), "/stats/summary"); code != http.StatusServiceUnavailable {
		t.Errorf("/stats/summary without Stats: %d, want 503", code)
	}
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	broken := func() {
		fake.InjectError("ListPodSandboxStats", fmt.Errorf("stats are broken"))
		fake.InjectError("ListContainerStats", fmt.Errorf("container stats are broken too"))
	}
	broken()
	stats, err := server.NewCRIStats(server.CRIStatsConfig{NodeName: "n", Runtime: fake, ProcDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err = server.New(server.Config{Pods: newFakeNode(), Stats: stats})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := getHandler(t, srv.Handler(), "/stats/summary"); code != 500 || !strings.Contains(body, "stats are broken") || !strings.Contains(body, "container stats are broken too") {
		t.Errorf("/stats/summary with a failing runtime: %d %q", code, body)
	}
	broken()
	if code, body := getHandler(t, srv.Handler(), "/metrics/resource"); code != 200 || !strings.Contains(body, "resource_scrape_error 1") {
		t.Errorf("/metrics/resource with a failing runtime: %d %q", code, body)
	}
	if _, err := server.NewCRIStats(server.CRIStatsConfig{Runtime: fake}); err == nil {
		t.Error("NewCRIStats without a node name was accepted")
	}
}

func BenchmarkStatsSummary(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			fake, err := fakecri.New(fakecri.Config{})
			if err != nil {
				b.Fatal(err)
			}
			statsPods(b, fake, n)
			proc := b.TempDir()
			writeProc(b, proc, 1000)
			stats, err := server.NewCRIStats(server.CRIStatsConfig{NodeName: "node-1", Runtime: fake, ProcDir: proc})
			if err != nil {
				b.Fatal(err)
			}
			srv, err := server.New(server.Config{Pods: newFakeNode(), Stats: stats})
			if err != nil {
				b.Fatal(err)
			}
			h := srv.Handler()
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats/summary", nil))
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}

// A runtime whose ListPodSandboxStats fails (not implemented; or, in
// containerd 1.6, a sandbox without a cgroup of its own) still gets pod
// figures: the sums of its running containers' stats.
func TestStatsSummaryWithoutSandboxStats(t *testing.T) {
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	statsPods(t, fake, 2)
	fake.InjectError("ListPodSandboxStats", status.Error(codes.Unimplemented, "not implemented"))
	stats, err := server.NewCRIStats(server.CRIStatsConfig{NodeName: "n", Runtime: fake, ProcDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := stats.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Pods) != 2 {
		t.Fatalf("%d pods, want 2", len(sum.Pods))
	}
	for _, p := range sum.Pods {
		if p.Memory == nil || *p.Memory.WorkingSetBytes != 100<<20 || *p.CPU.UsageNanoCores != 250_000_000 ||
			len(p.Containers) != 1 || *p.Containers[0].Memory.WorkingSetBytes != 100<<20 {
			t.Errorf("pod %s: %+v", p.PodRef.Name, p)
		}
	}
}

// CRIStatsConfig.VolumeStats gives each pod's volume figures in the
// summary, asked for by the pod's UID.
func TestStatsSummaryVolumeStats(t *testing.T) {
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	statsPods(t, fake, 2)
	used := uint64(5 << 20)
	stats, err := server.NewCRIStats(server.CRIStatsConfig{
		NodeName: "node-1", Runtime: fake, ProcDir: t.TempDir(), RootDir: t.TempDir(),
		VolumeStats: func(uid types.UID) []statsapi.VolumeStats {
			if uid != "uid-1" {
				return nil
			}
			return []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: &used}}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := stats.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]statsapi.VolumeStats{}
	for _, p := range s.Pods {
		got[p.PodRef.UID] = p.VolumeStats
	}
	if len(got) != 2 || len(got["uid-0"]) != 0 || len(got["uid-1"]) != 1 || got["uid-1"][0].Name != "scratch" || *got["uid-1"][0].UsedBytes != used {
		t.Errorf("pods' volume stats %+v, want uid-1's scratch using 5Mi and none for uid-0", got)
	}
}
