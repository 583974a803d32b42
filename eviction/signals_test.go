package eviction_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/eviction"
)

func u64(v uint64) *uint64 { return &v }

// summaryOf builds a summary over n's pods: each pod's working set from
// mem and its container "c" with rootfs and logs bytes from root and
// logs, plus the node figures node.
func summaryOf(n *node, node statsapi.NodeStats, mem, root, logs map[string]uint64) func(context.Context) (*statsapi.Summary, error) {
	return func(context.Context) (*statsapi.Summary, error) {
		s := &statsapi.Summary{Node: node}
		for _, p := range n.active() {
			ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}}
			c := statsapi.ContainerStats{Name: "c"}
			if w, ok := mem[p.Name]; ok {
				ps.Memory = &statsapi.MemoryStats{WorkingSetBytes: u64(w)}
				c.Memory = &statsapi.MemoryStats{WorkingSetBytes: u64(w)}
			}
			if r, ok := root[p.Name]; ok {
				c.Rootfs = &statsapi.FsStats{UsedBytes: u64(r), InodesUsed: u64(r / mi)}
			}
			if l, ok := logs[p.Name]; ok {
				c.Logs = &statsapi.FsStats{UsedBytes: u64(l), InodesUsed: u64(l / mi)}
			}
			ps.Containers = []statsapi.ContainerStats{c}
			s.Pods = append(s.Pods, ps)
		}
		return s, nil
	}
}

func fsFig(availMi, capMi uint64) *statsapi.FsStats {
	return &statsapi.FsStats{AvailableBytes: u64(availMi * mi), CapacityBytes: u64(capMi * mi), InodesFree: u64(1e6), Inodes: u64(2e6)}
}

func TestParseNewSignals(t *testing.T) {
	ts, err := eviction.Parse(eviction.Spec{
		Hard:                   map[string]string{"memory.available": "100Mi", "allocatableMemory.available": "200Mi", "containerfs.available": "10%", "containerfs.inodesFree": "5%"},
		Soft:                   map[string]string{"memory.available": "300Mi"},
		SoftGracePeriod:        map[string]string{"memory.available": "1m"},
		MinimumReclaim:         map[string]string{"memory.available": "50Mi"},
		EnforceNodeAllocatable: []string{"pods"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, th := range ts {
		mr := ""
		if th.MinReclaim != nil {
			mr = " +" + th.MinReclaim.String()
		}
		got = append(got, th.String()+" "+th.GracePeriod.String()+mr)
	}
	want := "allocatableMemory.available<200Mi 0s,containerfs.available<10% 0s,containerfs.inodesFree<5% 0s,memory.available<100Mi 0s +50Mi," +
		"memory.available<300Mi 1m0s +50Mi,allocatableMemory.available<100Mi 0s +50Mi"
	if strings.Join(got, ",") != want {
		t.Errorf("Parse = %v\nwant %s", strings.Join(got, ","), want)
	}
	ts, err = eviction.Parse(eviction.Spec{Hard: map[string]string{"memory.available": "100Mi"}})
	if err != nil || len(ts) != 1 {
		t.Errorf("Parse without EnforceNodeAllocatable = %v, %v; want memory.available alone", ts, err)
	}
}

// allocatableMemory.available comes from the summary's "pods" system
// container when it has one; else from Config.AllocatableMemory less the
// pods' working sets. Either way it raises MemoryPressure and evicts
// with the memory ranking and message, while memory.available is fine.
func TestAllocatableMemoryAvailable(t *testing.T) {
	for _, tc := range []struct {
		name        string
		sys         []statsapi.ContainerStats
		allocatable string
		available   string // in the message
		evicts      bool
	}{
		{name: "pods system container", available: "40Mi", evicts: true, sys: []statsapi.ContainerStats{
			{Name: "kubelet", Memory: &statsapi.MemoryStats{AvailableBytes: u64(0), WorkingSetBytes: u64(50 * mi)}},
			{Name: "pods", Memory: &statsapi.MemoryStats{AvailableBytes: u64(40 * mi), WorkingSetBytes: u64(600 * mi)}},
		}},
		{name: "allocatable less the pods' working sets", allocatable: "700Mi", available: "50Mi", evicts: true},
		{name: "allocatable with room", allocatable: "2Gi"},
		{name: "neither", allocatable: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			n := &node{}
			n.pods = []*v1.Pod{mkPod("small", "100Mi", 0), mkPod("big", "100Mi", 0), mkPod("important", "", 1000)}
			mem := map[string]uint64{"small": 50 * mi, "big": 400 * mi, "important": 200 * mi}
			nodeStats := statsapi.NodeStats{
				Memory:           &statsapi.MemoryStats{AvailableBytes: u64(8 << 30), WorkingSetBytes: u64(1 << 30)},
				SystemContainers: tc.sys,
			}
			m := newManager(t, n, clk, eviction.Spec{Hard: map[string]string{"allocatableMemory.available": "100Mi"}}, func(c *eviction.Config) {
				c.Summary = summaryOf(n, nodeStats, mem, nil, nil)
				if tc.allocatable != "" {
					c.AllocatableMemory = resource.MustParse(tc.allocatable)
				}
			})
			got := first(m.Synchronize(context.Background()))
			if !tc.evicts {
				if got != nil || pressure(m) != "memory=false disk=false pid=false" {
					t.Fatalf("evicted %v, pressure %s; want none", got, pressure(m))
				}
				return
			}
			if got == nil || got.Name != "big" {
				t.Fatalf("evicted %v, want big (over its request by the most)", got)
			}
			want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: " + tc.available + ". Container c was using 400Mi, request is 100Mi, has larger consumption of memory. "
			if n.messages[0] != want || pressure(m) != "memory=true disk=false pid=false" {
				t.Errorf("message %q, pressure %s; want %q, memory", n.messages[0], pressure(m), want)
			}
		})
	}
}

// The default thresholds include allocatableMemory.available<100Mi, the
// kubelet's with enforceNodeAllocatable [pods].
func TestDefaultThresholdsWatchAllocatableMemory(t *testing.T) {
	n := &node{pods: []*v1.Pod{mkPod("a", "", 0)}}
	nodeStats := statsapi.NodeStats{Memory: &statsapi.MemoryStats{AvailableBytes: u64(8 << 30), WorkingSetBytes: u64(1 << 30)}}
	m, err := eviction.New(eviction.Config{
		Summary: summaryOf(n, nodeStats, map[string]uint64{"a": 950 * mi}, nil, nil), ActivePods: n.active, Kill: n.kill,
		AllocatableMemory: resource.MustParse("1Gi"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := first(m.Synchronize(context.Background())); got == nil || pressure(m) != "memory=true disk=false pid=false" {
		t.Fatalf("evicted %v, pressure %s with 74Mi of allocatable memory left; want a, memory", got, pressure(m))
	}
}

// The containerfs thresholds are copies of those of the filesystem the
// writable layers live on; the signal is the summary's containerFs, or
// that filesystem's figures without one. Reclaim and ranking follow the
// kubelet's tables for the node's layout.
func TestContainerFsSignal(t *testing.T) {
	// Pod "layers" writes 60Mi to its writable layer, "logger" 80Mi of
	// logs; each 1Mi is an inode.
	root := map[string]uint64{"layers": 60 * mi, "logger": 1 * mi}
	logs := map[string]uint64{"layers": 1 * mi, "logger": 80 * mi}
	spec := eviction.Spec{Hard: map[string]string{"nodefs.available": "12.5%", "imagefs.available": "25%", "containerfs.available": "50%"}}
	for _, tc := range []struct {
		name             string
		dedicated        bool
		split            bool
		node, image, ctr *statsapi.FsStats
		threshold        string // in the message
		reclaimed        string
		evicted          string
	}{
		// One filesystem: containerfs<12.5% like nodefs, not the 50%
		// configured (it takes that one's place, first in order); both
		// reclaims; the pods' every figure counts.
		{name: "one filesystem", node: fsFig(500, 1000), image: fsFig(500, 1000), ctr: fsFig(50, 1000),
			threshold: "125Mi, available: 50Mi", reclaimed: "containers,images", evicted: "logger"},
		// Without containerFs in the summary: the image filesystem's
		// figures (imagefs<25% is met too, but comes later).
		{name: "one filesystem, no containerFs", node: fsFig(500, 1000), image: fsFig(50, 1000),
			threshold: "125Mi, available: 50Mi", reclaimed: "containers,images", evicted: "logger"},
		// Dedicated image filesystem: containerfs<25% like imagefs; both
		// reclaims; only the writable layers count.
		{name: "dedicated", dedicated: true, node: fsFig(500, 1000), image: fsFig(500, 1000), ctr: fsFig(150, 1000),
			threshold: "250Mi, available: 150Mi", reclaimed: "containers,images", evicted: "layers"},
		// Split: containerfs<12.5% like nodefs; dead containers only;
		// every figure counts.
		{name: "split", split: true, node: fsFig(500, 1000), image: fsFig(500, 1000), ctr: fsFig(50, 1000),
			threshold: "125Mi, available: 50Mi", reclaimed: "containers", evicted: "logger"},
		// Split without containerFs in the summary: the node's figures.
		{name: "split, no containerFs", split: true, node: fsFig(50, 1000), image: fsFig(500, 1000),
			threshold: "125Mi, available: 50Mi", reclaimed: "containers", evicted: "logger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			n := &node{pods: []*v1.Pod{mkPod("layers", "", 0), mkPod("logger", "", 0)}}
			nodeStats := statsapi.NodeStats{Fs: tc.node, Runtime: &statsapi.RuntimeStats{ImageFs: tc.image, ContainerFs: tc.ctr}}
			var reclaimed []string
			m := newManager(t, n, clk, spec, func(c *eviction.Config) {
				c.Summary = summaryOf(n, nodeStats, nil, root, logs)
				c.DedicatedImageFs, c.SplitImageFs = tc.dedicated, tc.split
				c.ReclaimContainers = func(context.Context) error { reclaimed = append(reclaimed, "containers"); return nil }
				c.ReclaimImages = func(context.Context) error { reclaimed = append(reclaimed, "images"); return nil }
			})
			got := first(m.Synchronize(context.Background()))
			if got == nil || got.Name != tc.evicted {
				t.Fatalf("evicted %v, want %s", got, tc.evicted)
			}
			if strings.Join(reclaimed, ",") != tc.reclaimed {
				t.Errorf("reclaimed %v, want %s", reclaimed, tc.reclaimed)
			}
			if want := "The node was low on resource: ephemeral-storage. Threshold quantity: " + tc.threshold + ". "; !strings.HasPrefix(n.messages[0], want) {
				t.Errorf("message %q, want it to start %q", n.messages[0], want)
			}
			if pressure(m) != "memory=false disk=true pid=false" {
				t.Errorf("pressure %s, want disk", pressure(m))
			}
		})
	}
}

// What each disk signal reclaims at node level and what ranking counts
// of a pod, per layout, as the kubelet's tables say.
func TestDiskSignalsByLayout(t *testing.T) {
	root := map[string]uint64{"layers": 60 * mi, "logger": 1 * mi}
	logs := map[string]uint64{"layers": 1 * mi, "logger": 80 * mi}
	type want struct{ reclaimed, evicted string }
	for _, tc := range []struct {
		layout string
		signal string
		want   want
	}{
		{"one", "nodefs.available", want{"containers,images", "logger"}},
		{"one", "imagefs.available", want{"containers,images", "logger"}},
		{"one", "nodefs.inodesFree", want{"containers,images", "logger"}},
		{"dedicated", "nodefs.available", want{"", "logger"}},
		{"dedicated", "imagefs.available", want{"containers,images", "layers"}},
		{"dedicated", "imagefs.inodesFree", want{"containers,images", "layers"}},
		{"split", "nodefs.available", want{"containers", "logger"}},
		{"split", "imagefs.available", want{"images", "layers"}}, // no pod is charged: order kept
	} {
		t.Run(tc.layout+" "+tc.signal, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			n := &node{pods: []*v1.Pod{mkPod("layers", "", 0), mkPod("logger", "", 0)}}
			full := &statsapi.FsStats{AvailableBytes: u64(10 * mi), CapacityBytes: u64(1000 * mi), InodesFree: u64(10), Inodes: u64(1000)}
			ok := fsFig(900, 1000)
			nodeStats := statsapi.NodeStats{Fs: ok, Runtime: &statsapi.RuntimeStats{ImageFs: ok, ContainerFs: ok}}
			if strings.HasPrefix(tc.signal, "nodefs") {
				nodeStats.Fs = full
			} else {
				nodeStats.Runtime.ImageFs = full
			}
			var reclaimed []string
			m := newManager(t, n, clk, eviction.Spec{Hard: map[string]string{tc.signal: "5%"}}, func(c *eviction.Config) {
				c.Summary = summaryOf(n, nodeStats, nil, root, logs)
				c.DedicatedImageFs, c.SplitImageFs = tc.layout == "dedicated", tc.layout == "split"
				c.ReclaimContainers = func(context.Context) error { reclaimed = append(reclaimed, "containers"); return nil }
				c.ReclaimImages = func(context.Context) error { reclaimed = append(reclaimed, "images"); return nil }
			})
			got := first(m.Synchronize(context.Background()))
			if g := fmt.Sprint(got != nil && got.Name == tc.want.evicted); g != "true" {
				t.Errorf("evicted %v, want %s", got, tc.want.evicted)
			}
			if strings.Join(reclaimed, ",") != tc.want.reclaimed {
				t.Errorf("reclaimed %v, want %q", reclaimed, tc.want.reclaimed)
			}
		})
	}
}
