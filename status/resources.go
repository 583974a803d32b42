package status

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// setContainerResources fills what a container status reports about
// resources, from the allocated spec c and the runtime's instance cs, as
// the kubelet's
// convertToAPIContainerStatuses does: resources, allocatedResources (the
// spec's requests) and user. old is the container's previous status.
func setContainerResources(st *v1.ContainerStatus, c *v1.Container, cs *runtime.ContainerStatus, old *v1.ContainerStatus) {
	st.Resources = containerResources(c, cs, st.ContainerID, old)
	st.AllocatedResources = c.Resources.Requests.DeepCopy()
	st.User = containerUser(cs.User)
}

// containerResources is the kubelet's convertContainerStatusResources. A
// container that does not run reports its spec's resources. A running
// one reports them too, with the CPU limit, CPU request and memory limit
// the runtime reports in their place, where the spec has limits (for the
// limits) or requests (for the CPU request); a CPU figure at or below the
// cgroup floor on both sides keeps the spec's. A figure the runtime does
// not report keeps the one the previous status gave the same running
// container, and is the spec's otherwise.
func containerResources(c *v1.Container, cs *runtime.ContainerStatus, id string, old *v1.ContainerStatus) *v1.ResourceRequirements {
	res := c.Resources.DeepCopy()
	if cs.State != runtime.ContainerStateRunning {
		return res
	}
	var prev *v1.ResourceRequirements
	if old != nil && old.State.Running != nil && old.ContainerID == id {
		prev = old.Resources
	}
	keep := func(name v1.ResourceName, from func(*v1.ResourceRequirements) v1.ResourceList, to v1.ResourceList) {
		if prev == nil {
			return
		}
		if q, ok := from(prev)[name]; ok {
			to[name] = q.DeepCopy()
		}
	}
	limits := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Limits }
	requests := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Requests }
	rr := cs.Resources
	if rr == nil {
		rr = &runtime.ContainerResources{}
	}
	if res.Limits != nil {
		if rr.CPULimit != nil {
			if rr.CPULimit.MilliValue() > podutil.MinMilliCPULimit || res.Limits.Cpu().MilliValue() > podutil.MinMilliCPULimit {
				res.Limits[v1.ResourceCPU] = rr.CPULimit.DeepCopy()
			}
		} else {
			keep(v1.ResourceCPU, limits, res.Limits)
		}
		if rr.MemoryLimit != nil {
			res.Limits[v1.ResourceMemory] = rr.MemoryLimit.DeepCopy()
		} else {
			keep(v1.ResourceMemory, limits, res.Limits)
		}
	}
	if res.Requests != nil {
		if rr.CPURequest != nil {
			// The kubelet compares milli-CPUs with the floor in shares.
			if rr.CPURequest.MilliValue() > podutil.MinShares || res.Requests.Cpu().MilliValue() > podutil.MinShares {
				res.Requests[v1.ResourceCPU] = rr.CPURequest.DeepCopy()
			}
		} else {
			keep(v1.ResourceCPU, requests, res.Requests)
		}
		// No cgroup setting shows a memory request: the one the
		// runtime's user recorded (runtime/cri does), else kept.
		if rr.MemoryRequest != nil {
			res.Requests[v1.ResourceMemory] = rr.MemoryRequest.DeepCopy()
		} else {
			keep(v1.ResourceMemory, requests, res.Requests)
		}
	}
	return res
}

// containerUser is the API form of the user the runtime reports.
func containerUser(u *runtime.ContainerUser) *v1.ContainerUser {
	if u == nil {
		return nil
	}
	out := &v1.ContainerUser{}
	if l := u.Linux; l != nil {
		out.Linux = &v1.LinuxContainerUser{UID: l.UID, GID: l.GID, SupplementalGroups: append([]int64(nil), l.SupplementalGroups...)}
	}
	return out
}

// runningPodResources is the kubelet's convertToAPIPodLevelResourcesStatus
// for a pod the API shows Running, whose cgroup's settings cg are known:
// spec.resources with the CPU request (from the shares), CPU limit (from
// the quota) and memory limit the cgroup has in their place (a CPU
// figure at or below the cgroup floor on both sides keeps the allocated
// one), a memory request from the effective requests where
// spec.resources sets none, and a figure the cgroup does not have (no
// limit) kept from the previous status of the Running pod.
func runningPodResources(pod *v1.Pod, cg *runtime.ContainerResources, prev *v1.PodStatus) *v1.ResourceRequirements {
	res := pod.Spec.Resources.DeepCopy()
	if res == nil {
		res = &v1.ResourceRequirements{}
	}
	if res.Requests == nil {
		res.Requests = v1.ResourceList{}
	}
	if res.Limits == nil {
		res.Limits = v1.ResourceList{}
	}
	keep := func(name v1.ResourceName, old func(*v1.ResourceRequirements) v1.ResourceList, to v1.ResourceList) {
		if prev == nil || prev.Phase != v1.PodRunning || prev.Resources == nil {
			return
		}
		if q, ok := old(prev.Resources)[name]; ok {
			to[name] = q.DeepCopy()
		}
	}
	requests := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Requests }
	limits := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Limits }
	if cg.CPURequest != nil {
		if cg.CPURequest.MilliValue() > podutil.MinShares || res.Requests.Cpu().MilliValue() > podutil.MinShares {
			res.Requests[v1.ResourceCPU] = cg.CPURequest.DeepCopy()
		}
	} else {
		keep(v1.ResourceCPU, requests, res.Requests)
	}
	if _, ok := res.Requests[v1.ResourceMemory]; !ok {
		if q, ok := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceMemory]; ok {
			res.Requests[v1.ResourceMemory] = q
		}
	}
	if cg.CPULimit != nil {
		if cg.CPULimit.MilliValue() > podutil.MinMilliCPULimit || res.Limits.Cpu().MilliValue() > podutil.MinMilliCPULimit {
			res.Limits[v1.ResourceCPU] = cg.CPULimit.DeepCopy()
		}
	} else {
		keep(v1.ResourceCPU, limits, res.Limits)
	}
	if cg.MemoryLimit != nil {
		res.Limits[v1.ResourceMemory] = cg.MemoryLimit.DeepCopy()
	} else {
		keep(v1.ResourceMemory, limits, res.Limits)
	}
	return res
}

// podResources are the pod's status.resources and
// status.allocatedResources. resources is the kubelet's
// getEffectiveAllocatedResources: spec.resources (claims included), with
// the pod's effective requests and limits (pod-level values where set,
// else the containers' aggregated as the scheduler counts them, plus the
// pod's overhead); for a pod the API shows Running whose cgroup's
// settings are known (cg), runningPodResources. allocated is the
// effective requests.
func podResources(pod *v1.Pod, cg *runtime.ContainerResources, prev *v1.PodStatus) (resources *v1.ResourceRequirements, allocated v1.ResourceList) {
	if pod.Status.Phase == v1.PodRunning && cg != nil {
		return runningPodResources(pod, cg, prev), resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	}
	resources = pod.Spec.Resources.DeepCopy()
	if resources == nil {
		resources = &v1.ResourceRequirements{}
	}
	allocated = resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	resources.Requests = allocated.DeepCopy()
	resources.Limits = resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	return resources, allocated
}
