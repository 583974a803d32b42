package eviction

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1 "k8s.io/component-helpers/scheduling/corev1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

type statsFunc func(*v1.Pod) (statsapi.PodStats, bool)

// cmpFunc orders two pods for eviction: negative when a goes first.
type cmpFunc func(a, b *v1.Pod) int

// Rank orders pods for eviction under the pressure that resource
// reclaims (memory, ephemeral-storage, inodes or pids), first to evict
// first, by the kubelet's rules:
//
//   - memory: pods without stats first, then those whose working set
//     exceeds their memory request, then lower priority, then larger
//     usage above the request;
//   - ephemeral-storage and inodes: the same with disk usage and the
//     ephemeral-storage request;
//   - pids: lower priority, then more processes.
//
// stats gives a pod's figures from the stats Summary. The sort is stable.
func Rank(pods []*v1.Pod, res v1.ResourceName, stats func(*v1.Pod) (statsapi.PodStats, bool)) {
	var cmps []cmpFunc
	switch res {
	case v1.ResourceMemory:
		use := func(ps statsapi.PodStats) *resource.Quantity { return memoryUsage(ps) }
		cmps = []cmpFunc{exceeds(stats, use, v1.ResourceMemory), byPriority, aboveRequest(stats, use, v1.ResourceMemory)}
	case resourcePIDs:
		cmps = []cmpFunc{byPriority, func(a, b *v1.Pod) int {
			sa, oka := stats(a)
			sb, okb := stats(b)
			if !oka || !okb {
				return cmpBool(!oka, !okb)
			}
			pa, pb := processUsage(sa), processUsage(sb)
			switch {
			case pa > pb:
				return -1
			case pa < pb:
				return 1
			}
			return 0
		}}
	default:
		use := func(ps statsapi.PodStats) *resource.Quantity { return diskUsage(ps, res) }
		cmps = []cmpFunc{exceeds(stats, use, v1.ResourceEphemeralStorage), byPriority, aboveRequest(stats, use, v1.ResourceEphemeralStorage)}
	}
	sort.SliceStable(pods, func(i, j int) bool {
		for _, c := range cmps {
			if r := c(pods[i], pods[j]); r != 0 {
				return r < 0
			}
		}
		return false
	})
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

func request(p *v1.Pod, res v1.ResourceName) resource.Quantity {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[res]
}

// exceeds puts first the pods without stats, then those using more than
// they request.
func exceeds(stats statsFunc, use func(statsapi.PodStats) *resource.Quantity, req v1.ResourceName) cmpFunc {
	return func(a, b *v1.Pod) int {
		sa, oka := stats(a)
		sb, okb := stats(b)
		if !oka || !okb {
			return cmpBool(!oka, !okb)
		}
		ra, rb := request(a, req), request(b, req)
		return cmpBool(use(sa).Cmp(ra) > 0, use(sb).Cmp(rb) > 0)
	}
}

// byPriority puts lower priorities first.
func byPriority(a, b *v1.Pod) int {
	pa, pb := corev1.PodPriority(a), corev1.PodPriority(b)
	switch {
	case pa < pb:
		return -1
	case pa > pb:
		return 1
	}
	return 0
}

// aboveRequest puts first the pods using most above their request.
func aboveRequest(stats statsFunc, use func(statsapi.PodStats) *resource.Quantity, req v1.ResourceName) cmpFunc {
	return func(a, b *v1.Pod) int {
		sa, oka := stats(a)
		sb, okb := stats(b)
		if !oka || !okb {
			return cmpBool(!oka, !okb)
		}
		ua, ub := use(sa), use(sb)
		ua.Sub(request(a, req))
		ub.Sub(request(b, req))
		return ub.Cmp(*ua)
	}
}
