package cri

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodekit/nodekit/internal/cgroupfs"
	"github.com/nodekit/nodekit/internal/podutil"
)

// qosTiers keeps the CPU shares of the burstable tier, the cgroup
// <CgroupRoot>/burstable that holds the burstable pods' cgroups, as the
// kubelet's QoS cgroup manager sets them: the shares of the sum of the
// CPU requests of the burstable pods, so that under contention the tier
// as a whole gets what its pods asked for beside the guaranteed pods
// (each a cgroup of its own beside the tier, with its own shares), and
// the best-effort tier its 2 shares. The kubelet recomputes the tier
// before it creates a pod cgroup, after it kills a pod, and every
// minute; here the tier follows each pod cgroup created, resized or
// removed.
type qosTiers struct {
	// requests holds, for each pod with a cgroup, its CPU request in
	// milli-CPUs if it is burstable, else 0.
	requests map[types.UID]int64
	// written are the shares last written to the tier, 0 before.
	written uint64
}

// podCPURequest is the pod's CPU request in milli-CPUs, as the kubelet
// counts it for the burstable tier, or 0 for a pod of another class.
func podCPURequest(pod *v1.Pod) int64 {
	if qosClass(pod) != v1.PodQOSBurstable {
		return 0
	}
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	if q, ok := reqs[v1.ResourceCPU]; ok {
		return q.MilliValue()
	}
	return 0
}

// notePodQoS counts the pod in the burstable tier (with its request as
// the spec now asks, when force, else as first seen) and brings the
// tier's shares up to date.
func (r *Runtime) notePodQoS(pod *v1.Pod, force bool) error {
	r.qosMu.Lock()
	defer r.qosMu.Unlock()
	if _, ok := r.qos.requests[pod.UID]; ok && !force {
		return nil
	}
	r.qos.requests[pod.UID] = podCPURequest(pod)
	return r.writeBurstableLocked()
}

// forgetPodQoS takes a pod whose cgroup is gone out of the burstable
// tier's sum.
func (r *Runtime) forgetPodQoS(uid types.UID) error {
	r.qosMu.Lock()
	defer r.qosMu.Unlock()
	if _, ok := r.qos.requests[uid]; !ok {
		return nil
	}
	delete(r.qos.requests, uid)
	return r.writeBurstableLocked()
}

// writeBurstableLocked writes the burstable tier's shares if they
// changed, creating the tier if need be.
func (r *Runtime) writeBurstableLocked() error {
	var sum int64
	for _, m := range r.qos.requests {
		sum += m
	}
	shares := uint64(podutil.MilliCPUToShares(sum))
	dir := r.cfg.CgroupRoot + "/burstable"
	exists := r.cgroups.Exists(dir)
	if shares == r.qos.written && exists {
		return nil
	}
	res := cgroupfs.Resources{CPUShares: &shares}
	var err error
	if exists {
		err = r.cgroups.Set(dir, res)
	} else {
		err = r.cgroups.Ensure(dir, res)
	}
	if err != nil {
		return fmt.Errorf("set the burstable cgroup %s: %w", dir, err)
	}
	r.qos.written = shares
	return nil
}
