package eviction

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// observation is one signal's reading.
type observation struct {
	available, capacity *resource.Quantity
}

// observe reads every signal the summary has.
func observe(s *statsapi.Summary) map[Signal]observation {
	out := map[Signal]observation{}
	bin := func(v uint64) *resource.Quantity { return resource.NewQuantity(int64(v), resource.BinarySI) }
	dec := func(v uint64) *resource.Quantity { return resource.NewQuantity(int64(v), resource.DecimalSI) }
	if m := s.Node.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		out[SignalMemoryAvailable] = observation{bin(*m.AvailableBytes), bin(*m.AvailableBytes + *m.WorkingSetBytes)}
	}
	fs := func(f *statsapi.FsStats, bytes, inodes Signal) {
		if f == nil {
			return
		}
		if f.AvailableBytes != nil && f.CapacityBytes != nil {
			out[bytes] = observation{bin(*f.AvailableBytes), bin(*f.CapacityBytes)}
		}
		if f.InodesFree != nil && f.Inodes != nil {
			out[inodes] = observation{dec(*f.InodesFree), dec(*f.Inodes)}
		}
	}
	fs(s.Node.Fs, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	if s.Node.Runtime != nil {
		fs(s.Node.Runtime.ImageFs, SignalImageFsAvailable, SignalImageFsInodesFree)
	}
	if r := s.Node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		out[SignalPIDAvailable] = observation{
			resource.NewQuantity(*r.MaxPID-int64(*r.NumOfRunningProcesses), resource.DecimalSI),
			resource.NewQuantity(*r.MaxPID, resource.DecimalSI),
		}
	}
	return out
}

// met returns the thresholds (by index) whose signal is below their
// value; with minReclaim, below value plus minimum reclaim.
func met(ts []Threshold, obs map[Signal]observation, idx []int, minReclaim bool) []int {
	var out []int
	for _, i := range idx {
		t := ts[i]
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.of(o.capacity)
		if minReclaim && t.MinReclaim != nil {
			q.Add(*t.MinReclaim.of(o.capacity))
		}
		if q.Cmp(*o.available) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// podStats indexes the summary's pods by UID.
func podStats(s *statsapi.Summary) func(*v1.Pod) (statsapi.PodStats, bool) {
	m := make(map[types.UID]statsapi.PodStats, len(s.Pods))
	for _, p := range s.Pods {
		m[types.UID(p.PodRef.UID)] = p
	}
	return func(p *v1.Pod) (statsapi.PodStats, bool) {
		ps, ok := m[p.UID]
		return ps, ok
	}
}

// memoryUsage is a pod's working set.
func memoryUsage(ps statsapi.PodStats) *resource.Quantity {
	if ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
		return resource.NewQuantity(0, resource.BinarySI)
	}
	return resource.NewQuantity(int64(*ps.Memory.WorkingSetBytes), resource.BinarySI)
}

// diskUsage is a pod's ephemeral storage (bytes) or inodes: the
// summary's pod total when it has one, else its containers' root
// filesystems and logs.
func diskUsage(ps statsapi.PodStats, res v1.ResourceName) *resource.Quantity {
	var total uint64
	pick := func(f *statsapi.FsStats) uint64 {
		if f == nil {
			return 0
		}
		if res == resourceInodes {
			if f.InodesUsed != nil {
				return *f.InodesUsed
			}
			return 0
		}
		if f.UsedBytes != nil {
			return *f.UsedBytes
		}
		return 0
	}
	if ps.EphemeralStorage != nil {
		total = pick(ps.EphemeralStorage)
	} else {
		for _, c := range ps.Containers {
			total += pick(c.Rootfs) + pick(c.Logs)
		}
	}
	return resource.NewQuantity(int64(total), resource.BinarySI)
}

// processUsage is a pod's process count.
func processUsage(ps statsapi.PodStats) uint64 {
	if ps.ProcessStats == nil || ps.ProcessStats.ProcessCount == nil {
		return 0
	}
	return *ps.ProcessStats.ProcessCount
}
