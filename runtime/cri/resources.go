package cri

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/podutil"
)

// The kubelet's OOM constants.
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
)

// defaultMemoryCapacity is the node memory assumed for burstable OOM
// scores when Config.NodeAllocatable has none.
var defaultMemoryCapacity = resource.MustParse("1Ti")

// qosClass is the pod's QoS class.
func qosClass(pod *v1.Pod) v1.PodQOSClass { return podutil.QOSClass(pod) }

// linuxResources maps a container's requests and limits to CRI Linux
// resources (cgroupSettings) with the OOM score of the pod's QoS class.
func (r *Runtime) linuxResources(pod *v1.Pod, c *v1.Container, qos v1.PodQOSClass) *runtimeapi.LinuxContainerResources {
	cs := containerSettings(pod, c)
	res := &runtimeapi.LinuxContainerResources{CpuShares: cs.shares, MemoryLimitInBytes: cs.memory}
	if cs.quota > 0 {
		res.CpuPeriod = podutil.QuotaPeriod
		res.CpuQuota = cs.quota
	}
	res.OomScoreAdj = r.oomScoreAdj(c, qos)
	return res
}

// cgroupSettings are the CPU and memory settings of a container or pod
// cgroup as nodekit compares them: CPU shares, the CFS quota over
// podutil.QuotaPeriod (0: no limit) and the memory limit in bytes (0:
// none).
type cgroupSettings struct {
	shares, quota, memory int64
}

// containerSettings are the kubelet's for a container: CPU shares from
// the request (the limit when there is no request), CFS quota from the
// CPU limit, and the memory limit. A limit the container does not set
// is the pod-level one, where spec.resources sets it.
func containerSettings(pod *v1.Pod, c *v1.Container) cgroupSettings {
	limit := func(name v1.ResourceName) (resource.Quantity, bool) {
		q, ok := c.Resources.Limits[name]
		if (!ok || q.IsZero()) && pod.Spec.Resources != nil {
			if pq, pok := pod.Spec.Resources.Limits[name]; pok {
				return pq, true
			}
		}
		return q, ok
	}
	cs := cgroupSettings{shares: podutil.MinShares}
	cpuLim, hasLim := limit(v1.ResourceCPU)
	cpuReq, hasReq := c.Resources.Requests[v1.ResourceCPU]
	if !hasReq && hasLim {
		cpuReq, hasReq = cpuLim, true
	}
	if hasReq {
		cs.shares = podutil.MilliCPUToShares(cpuReq.MilliValue())
	}
	if hasLim && !cpuLim.IsZero() {
		cs.quota = podutil.MilliCPUToQuota(cpuLim.MilliValue(), podutil.QuotaPeriod)
	}
	if mem, ok := limit(v1.ResourceMemory); ok {
		cs.memory = mem.Value()
	}
	return cs
}

// oomScoreAdj is the kubelet's: -997 for guaranteed, 1000 for best
// effort, and for burstable pods 1000 - 1000*request/capacity, kept in
// 3..999.
func (r *Runtime) oomScoreAdj(c *v1.Container, qos v1.PodQOSClass) int64 {
	switch qos {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	capacity := defaultMemoryCapacity
	if m, ok := r.cfg.NodeAllocatable[v1.ResourceMemory]; ok && !m.IsZero() {
		capacity = m
	}
	req := c.Resources.Requests[v1.ResourceMemory]
	adj := 1000 - (1000*req.Value())/capacity.Value()
	if adj < 1000+guaranteedOOMScoreAdj {
		return 1000 + guaranteedOOMScoreAdj
	}
	if adj == besteffortOOMScoreAdj {
		return adj - 1
	}
	return adj
}

// cgroupParent is <root>/<qos>/pod<uid>, or <root>/pod<uid> for
// guaranteed pods: the kubelet's cgroupfs layout.
func (r *Runtime) cgroupParent(pod *v1.Pod) string {
	if r.cfg.CgroupRoot == "" {
		return ""
	}
	switch qosClass(pod) {
	case v1.PodQOSBurstable:
		return r.cfg.CgroupRoot + "/burstable/pod" + string(pod.UID)
	case v1.PodQOSBestEffort:
		return r.cfg.CgroupRoot + "/besteffort/pod" + string(pod.UID)
	}
	return r.cfg.CgroupRoot + "/pod" + string(pod.UID)
}
