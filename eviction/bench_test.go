package eviction_test

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/eviction"
)

// benchNode is a node of n pods, each with one container using memory
// and disk, and the node's figures with availBytes of memory free.
func benchNode(n int, availBytes uint64) ([]*v1.Pod, *statsapi.Summary) {
	u := func(v uint64) *uint64 { return &v }
	pods := make([]*v1.Pod, 0, n)
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		Memory: &statsapi.MemoryStats{AvailableBytes: u(availBytes), WorkingSetBytes: u(60 << 30)},
		Fs:     &statsapi.FsStats{AvailableBytes: u(500 << 30), CapacityBytes: u(1 << 40), InodesFree: u(50e6), Inodes: u(60e6)},
		Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{
			AvailableBytes: u(500 << 30), CapacityBytes: u(1 << 40), InodesFree: u(50e6), Inodes: u(60e6),
		}},
	}}
	for i := range n {
		prio := int32(i % 7)
		name := fmt.Sprintf("p%04d", i)
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
			Spec: v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("50Mi")},
			}}}},
		}
		pods = append(pods, p)
		mem, disk := uint64(i%97)<<20, uint64(i%89)<<20
		s.Pods = append(s.Pods, statsapi.PodStats{
			PodRef:           statsapi.PodReference{Name: name, Namespace: "ns", UID: string(p.UID)},
			Memory:           &statsapi.MemoryStats{WorkingSetBytes: u(mem)},
			EphemeralStorage: &statsapi.FsStats{UsedBytes: u(disk)},
			Containers: []statsapi.ContainerStats{{
				Name: "c", Memory: &statsapi.MemoryStats{WorkingSetBytes: u(mem)},
				Rootfs: &statsapi.FsStats{UsedBytes: u(disk)}, Logs: &statsapi.FsStats{UsedBytes: u(1 << 10)},
			}},
		})
	}
	return pods, s
}

// BenchmarkSynchronize1000 is one monitoring pass over 1000 pods with
// the default thresholds: "idle" finds no threshold met; "evicting"
// finds memory short, ranks the 1000 pods and evicts the first.
func BenchmarkSynchronize1000(b *testing.B) {
	for _, tc := range []struct {
		name  string
		avail uint64
	}{{"idle", 4 << 30}, {"evicting", 50 << 20}} {
		b.Run(tc.name, func(b *testing.B) {
			pods, s := benchNode(1000, tc.avail)
			kills := 0
			m, err := eviction.New(eviction.Config{
				Summary:    func(context.Context) (*statsapi.Summary, error) { return s, nil },
				ActivePods: func() []*v1.Pod { return pods },
				Kill: func(context.Context, *v1.Pod, eviction.Eviction) error {
					kills++
					return nil
				},
			})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				m.Synchronize(ctx)
			}
			if (kills > 0) != (tc.name == "evicting") {
				b.Fatalf("%d kills in %s", kills, tc.name)
			}
		})
	}
}
