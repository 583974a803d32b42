package cri

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
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

// containerValues are the four figures the kubelet compares to resize a
// container: its CPU request and limit in milli-CPUs and its memory
// request and limit in bytes (0: not set), a limit the container does
// not set being the pod-level one, where spec.resources sets it.
type containerValues struct {
	cpuReq, cpuLim, memReq, memLim int64
	// cpuReqSet: the spec names a CPU request (possibly 0); without one
	// the CPU shares come from the limit.
	cpuReqSet bool
}

// valuesOf are a container's containerValues.
func valuesOf(pod *v1.Pod, c *v1.Container) containerValues {
	limit := func(name v1.ResourceName) int64 {
		q, ok := c.Resources.Limits[name]
		if (!ok || q.IsZero()) && pod.Spec.Resources != nil {
			q, ok = pod.Spec.Resources.Limits[name]
		}
		if !ok {
			return 0
		}
		if name == v1.ResourceCPU {
			return q.MilliValue()
		}
		return q.Value()
	}
	v := containerValues{cpuLim: limit(v1.ResourceCPU), memLim: limit(v1.ResourceMemory)}
	if q, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		v.cpuReq, v.cpuReqSet = q.MilliValue(), true
	}
	if q, ok := c.Resources.Requests[v1.ResourceMemory]; ok {
		v.memReq = q.Value()
	}
	return v
}

// settings are the kubelet's cgroup settings for the values: CPU shares
// from the request (the limit when the spec names no request), CFS
// quota from the CPU limit, and the memory limit.
func (v containerValues) settings() cgroupSettings {
	s := cgroupSettings{shares: podutil.MinShares, memory: v.memLim}
	switch {
	case v.cpuReqSet:
		s.shares = podutil.MilliCPUToShares(v.cpuReq)
	case v.cpuLim > 0:
		s.shares = podutil.MilliCPUToShares(v.cpuLim)
	}
	if v.cpuLim > 0 {
		s.quota = podutil.MilliCPUToQuota(v.cpuLim, podutil.QuotaPeriod)
	}
	return s
}

// containerSettings are a container's cgroup settings.
func containerSettings(pod *v1.Pod, c *v1.Container) cgroupSettings {
	return valuesOf(pod, c).settings()
}

// resources are the values in the API's units, as a runtime reports
// them, with the memory request.
func (v containerValues) resources() *runtime.ContainerResources {
	out := &runtime.ContainerResources{}
	if v.cpuReq > 0 {
		out.CPURequest = resource.NewMilliQuantity(v.cpuReq, resource.DecimalSI)
	}
	if v.cpuLim > 0 {
		out.CPULimit = resource.NewMilliQuantity(v.cpuLim, resource.DecimalSI)
	}
	if v.memReq > 0 {
		out.MemoryRequest = resource.NewQuantity(v.memReq, resource.BinarySI)
	}
	if v.memLim > 0 {
		out.MemoryLimit = resource.NewQuantity(v.memLim, resource.BinarySI)
	}
	return out
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
