package eviction

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1 "k8s.io/component-helpers/scheduling/corev1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

type statsFunc func(*v1.Pod) (statsapi.PodStats, bool)

// Rank orders pods for eviction under the pressure that resource
// reclaims (memory, ephemeral-storage, inodes or pids), first to evict
// first, by the kubelet's rules:
//
//   - memory: pods without stats first, then those whose working set
//     exceeds their memory request, then lower priority, then larger
//     usage above the request;
//   - ephemeral-storage and inodes: the same with disk usage and the
//     ephemeral-storage request, the usage counted as on a node with
//     one filesystem: the containers' writable layers and logs and the
//     pod's local volumes (emptyDir on disk, hostPath, configMap,
//     gitRepo). The Manager counts only what lives on the filesystem
//     under pressure (see Config.DedicatedImageFs);
//   - pids: lower priority, then more processes.
//
// stats gives a pod's figures from the stats Summary. The sort is
// stable; each pod's figures are read once.
func Rank(pods []*v1.Pod, res v1.ResourceName, stats func(*v1.Pod) (statsapi.PodStats, bool)) {
	rank(pods, res, measureAll, stats)
}

// fsMeasure says which of a pod's disk figures count on a filesystem:
// the containers' writable layers (root), their logs, the pod's local
// volumes.
type fsMeasure struct{ root, logs, volumes bool }

var measureAll = fsMeasure{root: true, logs: true, volumes: true}

// rankKey is what ranking compares of one pod, read once.
type rankKey struct {
	pod      *v1.Pod
	stats    bool  // the summary has the pod
	exceeds  bool  // usage above the request
	priority int32 // spec.priority, 0 when unset
	above    int64 // usage less the request
	procs    uint64
}

func rank(pods []*v1.Pod, res v1.ResourceName, m fsMeasure, stats statsFunc) {
	keys := make([]rankKey, len(pods))
	for i, p := range pods {
		k := rankKey{pod: p, priority: corev1.PodPriority(p)}
		ps, ok := stats(p)
		k.stats = ok
		if ok {
			switch res {
			case resourcePIDs:
				if ps.ProcessStats != nil && ps.ProcessStats.ProcessCount != nil {
					k.procs = *ps.ProcessStats.ProcessCount
				}
			case v1.ResourceMemory:
				use := memoryUsage(ps)
				req := requestOf(p, v1.ResourceMemory)
				k.exceeds, k.above = use > req, use-req
			default:
				use := diskUsage(p, ps, m, res == resourceInodes)
				// As in the kubelet: exceeding is against the request of
				// what is short (no pod requests inodes), the distance
				// against the ephemeral-storage request.
				var req int64
				if res == v1.ResourceEphemeralStorage {
					req = requestOf(p, v1.ResourceEphemeralStorage)
				}
				k.exceeds = use > req
				k.above = use - requestOf(p, v1.ResourceEphemeralStorage)
			}
		}
		keys[i] = k
	}
	if res == resourcePIDs {
		slices.SortStableFunc(keys, func(a, b rankKey) int {
			if c := cmp.Compare(a.priority, b.priority); c != 0 {
				return c
			}
			if !a.stats || !b.stats {
				return cmpBool(!a.stats, !b.stats)
			}
			return cmp.Compare(b.procs, a.procs)
		})
	} else {
		slices.SortStableFunc(keys, func(a, b rankKey) int {
			if !a.stats || !b.stats {
				if c := cmpBool(!a.stats, !b.stats); c != 0 {
					return c
				}
			} else if c := cmpBool(a.exceeds, b.exceeds); c != 0 {
				return c
			}
			if c := cmp.Compare(a.priority, b.priority); c != 0 {
				return c
			}
			if !a.stats || !b.stats {
				return cmpBool(!a.stats, !b.stats)
			}
			return cmp.Compare(b.above, a.above)
		})
	}
	for i := range keys {
		pods[i] = keys[i].pod
	}
}

// cmpBool puts true first.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// requestOf is the pod's request of res in its unit (bytes), as the
// kubelet's eviction counts it: the pod's requests, with the overhead
// when they are not zero.
func requestOf(p *v1.Pod, res v1.ResourceName) int64 {
	q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})[res]
	if o, ok := p.Spec.Overhead[res]; ok && !q.IsZero() {
		q.Add(o)
	}
	return q.Value()
}

// memoryUsage is a pod's working set in bytes.
func memoryUsage(ps statsapi.PodStats) int64 {
	if ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
		return 0
	}
	return int64(*ps.Memory.WorkingSetBytes)
}

// diskUsage is a pod's bytes (or inodes) on a filesystem: what m counts
// of its containers' writable layers and logs and its local volumes.
// A pod whose stats have no container or volume filesystem figures is
// measured by its ephemeral-storage total, when the summary has one.
func diskUsage(p *v1.Pod, ps statsapi.PodStats, m fsMeasure, inodes bool) int64 {
	pick := func(f *statsapi.FsStats) uint64 {
		if f == nil {
			return 0
		}
		if inodes {
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
	known := len(ps.VolumeStats) > 0
	var total uint64
	for i := range ps.Containers {
		c := &ps.Containers[i]
		known = known || c.Rootfs != nil || c.Logs != nil
		if m.root {
			total += pick(c.Rootfs)
		}
		if m.logs {
			total += pick(c.Logs)
		}
	}
	if m.volumes && len(ps.VolumeStats) > 0 {
		for _, v := range p.Spec.Volumes {
			if !localVolume(&v) {
				continue
			}
			for j := range ps.VolumeStats {
				if ps.VolumeStats[j].Name == v.Name {
					total += pick(&ps.VolumeStats[j].FsStats)
					break
				}
			}
		}
	}
	if !known && ps.EphemeralStorage != nil {
		total = pick(ps.EphemeralStorage)
	}
	return int64(total)
}

// localVolume reports whether a volume's data is on the node's disk as
// the kubelet's eviction counts it: hostPath, gitRepo, configMap, and
// emptyDir not in memory.
func localVolume(v *v1.Volume) bool {
	return v.HostPath != nil || v.GitRepo != nil || v.ConfigMap != nil ||
		(v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault)
}
