package cri

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodekit/nodekit/internal/cgroupfs"
	"github.com/nodekit/nodekit/internal/podutil"
)

// qosTiers keeps the CPU shares of the QoS tiers, the cgroups
// <CgroupRoot>/burstable and <CgroupRoot>/besteffort that hold those
// pods' cgroups, as the kubelet's QoS cgroup manager sets them: the
// burstable tier the shares of the sum of its pods' CPU requests, so
// that under contention the tier as a whole gets what its pods asked
// for beside the guaranteed pods (each a cgroup of its own beside the
// tiers), and the best-effort tier the minimum, 2. The kubelet
// recomputes them before it creates a pod cgroup, after it kills a pod,
// and every minute; here they follow each pod cgroup created, resized or
// removed, and a failed write is logged and tried again at the next
// change, a sync that sets up a pod, or the garbage collection.
type qosTiers struct {
	// requests holds, for each pod with a cgroup, its CPU request in
	// milli-CPUs if it is burstable, else 0. Until a pod is synced, a
	// cgroup an earlier run made counts with the request its shares
	// stand for (seeded).
	requests map[types.UID]int64
	exact    map[types.UID]bool
	seeded   bool
	// burstable is the burstable tier's shares as last written (0
	// before); bestEffort whether the best-effort tier's were; failed
	// whether the last write failed.
	burstable  uint64
	bestEffort bool
	failed     bool
}

// podCPURequest is the pod's CPU request in milli-CPUs: its effective
// requests as the scheduler adds them up (pod-level where set), plus its
// overhead; 0 without one.
func podCPURequest(pod *v1.Pod) int64 {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	if q, ok := reqs[v1.ResourceCPU]; ok {
		return q.MilliValue()
	}
	return 0
}

// notePodQoS counts the pod in the QoS tiers, with its request as the
// spec gives it, and brings the tiers' shares up to date. Without force
// (a resize) a pod already counted from its spec is left as it is, once
// the tiers are written.
func (r *Runtime) notePodQoS(pod *v1.Pod, force bool) {
	r.qosMu.Lock()
	defer r.qosMu.Unlock()
	r.seedQoSLocked()
	if r.qos.exact[pod.UID] && !force && !r.qos.failed {
		return
	}
	var m int64
	if qosClass(pod) == v1.PodQOSBurstable {
		m = podCPURequest(pod)
	}
	r.qos.requests[pod.UID] = m
	r.qos.exact[pod.UID] = true
	r.writeTiersLocked()
}

// retryQoS writes the tiers again if the last write failed.
func (r *Runtime) retryQoS() {
	r.qosMu.Lock()
	defer r.qosMu.Unlock()
	if r.qos.failed {
		r.writeTiersLocked()
	}
}

// forgetPodQoS takes a pod whose cgroup is gone out of the burstable
// tier's sum.
func (r *Runtime) forgetPodQoS(uid types.UID) {
	r.qosMu.Lock()
	defer r.qosMu.Unlock()
	r.seedQoSLocked()
	delete(r.qos.requests, uid)
	delete(r.qos.exact, uid)
	r.writeTiersLocked()
}

// sharesWanted are the burstable tier's shares for the current sum.
func (q *qosTiers) sharesWanted() uint64 {
	var sum int64
	for _, m := range q.requests {
		sum += m
	}
	return uint64(podutil.MilliCPUToShares(sum))
}

// seedQoSLocked counts, once, the burstable pods whose cgroups an
// earlier run made, with the request their shares stand for, so that
// the tier is right before they are synced and a pod removed without a
// sync in this run leaves the sum.
func (r *Runtime) seedQoSLocked() {
	if r.qos.seeded {
		return
	}
	r.qos.seeded = true
	dir := r.cfg.CgroupRoot + "/burstable"
	if !r.cgroups.Exists(dir) {
		return
	}
	names, err := r.cgroups.Children(dir)
	if err != nil {
		r.log.Error(err, "listing the burstable pod cgroups", "cgroup", dir)
		return
	}
	for _, n := range names {
		uid, ok := strings.CutPrefix(n, "pod")
		if !ok || !cgroupUID(types.UID(uid)) {
			continue
		}
		c, err := r.cgroups.Get(dir + "/" + n)
		if err != nil {
			continue // gone meanwhile
		}
		r.qos.requests[types.UID(uid)] = podutil.SharesToMilliCPU(settingsOfCgroup(c).shares)
	}
}

// writeTiersLocked writes the tiers' shares where they changed, creating
// the tiers if need be; a failure is logged, and the write is tried
// again at the next change or sync.
func (r *Runtime) writeTiersLocked() {
	r.qos.failed = false
	if !r.qos.bestEffort {
		dir := r.cfg.CgroupRoot + "/besteffort"
		if err := r.writeShares(dir, podutil.MinShares); err != nil {
			r.log.Error(err, "setting the best-effort cgroup's CPU shares", "cgroup", dir)
			r.qos.failed = true
		} else {
			r.qos.bestEffort = true
		}
	}
	shares := r.qos.sharesWanted()
	if shares == r.qos.burstable {
		return
	}
	dir := r.cfg.CgroupRoot + "/burstable"
	if err := r.writeShares(dir, int64(shares)); err != nil {
		r.log.Error(err, "setting the burstable cgroup's CPU shares", "cgroup", dir, "shares", shares)
		r.qos.burstable = 0
		r.qos.failed = true
		return
	}
	r.qos.burstable = shares
}

// writeShares sets a cgroup's CPU shares, creating it if need be.
func (r *Runtime) writeShares(dir string, shares int64) error {
	s := uint64(shares)
	res := cgroupfs.Resources{CPUShares: &s}
	if r.cgroups.Exists(dir) {
		return r.cgroups.Set(dir, res)
	}
	return r.cgroups.Ensure(dir, res)
}
