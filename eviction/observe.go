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

// observe reads every signal the summary has. allocatable is the node's
// allocatable memory in bytes (0: unknown), for
// allocatableMemory.available when the summary has no "pods" system
// container; fs says where the containers' writable layers live, for
// containerfs when the summary has no containerFs.
func observe(s *statsapi.Summary, allocatable int64, fs layout) map[Signal]observation {
	out := make(map[Signal]observation, 9)
	bin := func(v uint64) *resource.Quantity { return resource.NewQuantity(int64(v), resource.BinarySI) }
	dec := func(v uint64) *resource.Quantity { return resource.NewQuantity(int64(v), resource.DecimalSI) }
	if m := s.Node.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		out[SignalMemoryAvailable] = observation{bin(*m.AvailableBytes), bin(*m.AvailableBytes + *m.WorkingSetBytes)}
	}
	if o, ok := allocatableMemory(s, allocatable); ok {
		out[SignalAllocatableMemoryAvailable] = o
	}
	read := func(f *statsapi.FsStats, bytes, inodes Signal) {
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
	read(s.Node.Fs, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	var imageFs, containerFs *statsapi.FsStats
	if s.Node.Runtime != nil {
		imageFs, containerFs = s.Node.Runtime.ImageFs, s.Node.Runtime.ContainerFs
	}
	read(imageFs, SignalImageFsAvailable, SignalImageFsInodesFree)
	if containerFs == nil {
		// The figures of the filesystem the writable layers live on: the
		// image filesystem, or the node's with a split image filesystem
		// or none reported.
		containerFs = imageFs
		if fs.split || imageFs == nil {
			containerFs = s.Node.Fs
		}
	}
	read(containerFs, SignalContainerFsAvailable, SignalContainerFsInodesFree)
	if r := s.Node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		out[SignalPIDAvailable] = observation{
			resource.NewQuantity(*r.MaxPID-int64(*r.NumOfRunningProcesses), resource.DecimalSI),
			resource.NewQuantity(*r.MaxPID, resource.DecimalSI),
		}
	}
	return out
}

// allocatableMemory observes allocatableMemory.available: from the
// summary's "pods" system container, as the kubelet does, or else as
// allocatable (bytes) less the pods' working sets.
func allocatableMemory(s *statsapi.Summary, allocatable int64) (observation, bool) {
	for _, c := range s.Node.SystemContainers {
		if c.Name != statsapi.SystemContainerPods {
			continue
		}
		if m := c.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
			return observation{
				resource.NewQuantity(int64(*m.AvailableBytes), resource.BinarySI),
				resource.NewQuantity(int64(*m.AvailableBytes+*m.WorkingSetBytes), resource.BinarySI),
			}, true
		}
	}
	if allocatable <= 0 {
		return observation{}, false
	}
	var used int64
	for i := range s.Pods {
		if m := s.Pods[i].Memory; m != nil && m.WorkingSetBytes != nil {
			used += int64(*m.WorkingSetBytes)
		}
	}
	return observation{
		resource.NewQuantity(max(allocatable-used, 0), resource.BinarySI),
		resource.NewQuantity(allocatable, resource.BinarySI),
	}, true
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
