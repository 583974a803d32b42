package cri

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodekit/nodekit/internal/cgroupfs"
	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// podCgroupPath is the pod's cgroup when nodekit manages pod cgroups
// (Config.CgroupRoot), else "" (also for a UID that cannot name one).
func (r *Runtime) podCgroupPath(pod *v1.Pod) string {
	if r.cgroups == nil || !cgroupUID(pod.UID) {
		return ""
	}
	return r.cgroupParent(pod)
}

// cgroupUID reports whether a pod UID can name a cgroup, by the rule
// pod sources check UIDs with (podutil.UIDProblem). A UID read from a
// runtime's labels is not trusted to be one.
func cgroupUID(uid types.UID) bool { return podutil.UIDProblem(uid) == "" }

// podCgroupSettings are the kubelet's pod cgroup settings: CPU shares
// from the pod's requests; the CFS quota and memory limit from its
// limits, for a guaranteed pod, and for a burstable one where every
// container (or the pod-level spec.resources) sets that limit; a
// best-effort pod gets the minimum shares only. Requests and limits are
// the pod's effective ones: pod-level values where set, else the
// containers' as the scheduler adds them up, plus the pod's overhead.
func podCgroupSettings(pod *v1.Pod) cgroupSettings {
	qos := qosClass(pod)
	s := cgroupSettings{shares: podutil.MinShares}
	if qos == v1.PodQOSBestEffort {
		return s
	}
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cpuDeclared, memDeclared := true, true
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if q := list[i].Resources.Limits[v1.ResourceCPU]; q.IsZero() {
				cpuDeclared = false
			}
			if q := list[i].Resources.Limits[v1.ResourceMemory]; q.IsZero() {
				memDeclared = false
			}
		}
	}
	if pr := pod.Spec.Resources; pr != nil {
		if q, ok := pr.Limits[v1.ResourceCPU]; ok && !q.IsZero() {
			cpuDeclared = true
		}
		if q, ok := pr.Limits[v1.ResourceMemory]; ok && !q.IsZero() {
			memDeclared = true
		}
	}
	s.shares = podutil.MilliCPUToShares(podCPURequest(pod))
	if qos == v1.PodQOSGuaranteed || cpuDeclared {
		if q, ok := limits[v1.ResourceCPU]; ok && !q.IsZero() {
			s.quota = podutil.MilliCPUToQuota(q.MilliValue(), podutil.QuotaPeriod)
		}
	}
	if qos == v1.PodQOSGuaranteed || memDeclared {
		if q, ok := limits[v1.ResourceMemory]; ok {
			s.memory = q.Value()
		}
	}
	return s
}

// cgroupResources are settings as the cgroup files take them: no limit
// is -1.
func cgroupResources(s cgroupSettings) cgroupfs.Resources {
	shares := uint64(s.shares)
	quota, period := int64(-1), uint64(podutil.QuotaPeriod)
	if s.quota > 0 {
		quota = s.quota
	}
	memory := int64(-1)
	if s.memory > 0 {
		memory = s.memory
	}
	return cgroupfs.Resources{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, MemoryLimit: &memory}
}

// settingsOfCgroup are the settings read back from a cgroup.
func settingsOfCgroup(c cgroupfs.Resources) cgroupSettings {
	s := cgroupSettings{shares: podutil.MinShares}
	if c.CPUShares != nil {
		s.shares = int64(*c.CPUShares)
	}
	if c.CPUQuota != nil && *c.CPUQuota > 0 {
		s.quota = *c.CPUQuota
		if c.CPUPeriod != nil && *c.CPUPeriod != 0 && *c.CPUPeriod != podutil.QuotaPeriod {
			s.quota = *c.CPUQuota * podutil.QuotaPeriod / int64(*c.CPUPeriod)
		}
	}
	if c.MemoryLimit != nil && *c.MemoryLimit > 0 {
		s.memory = *c.MemoryLimit
	}
	return s
}

// ensurePodCgroup creates the pod's cgroup with its settings unless it
// exists, as the kubelet does before it creates the sandbox.
func (r *Runtime) ensurePodCgroup(pod *v1.Pod) error {
	path := r.podCgroupPath(pod)
	if path == "" {
		return nil
	}
	// The QoS tiers first, as the kubelet updates them before it
	// creates a pod's cgroup.
	r.notePodQoS(pod, false)
	if r.cgroups.Exists(path) {
		return nil
	}
	s := podCgroupSettings(pod)
	if err := r.cgroups.Ensure(path, cgroupResources(s)); err != nil {
		return fmt.Errorf("create pod cgroup %s: %w", path, err)
	}
	r.recordPod(pod.UID, s)
	return nil
}

// podCgroupHave are the pod cgroup's settings: those nodekit last wrote,
// else those read from it.
func (r *Runtime) podCgroupHave(uid types.UID, path string) (cgroupSettings, error) {
	if have := r.recordedPod(uid); have != nil {
		return *have, nil
	}
	c, err := r.cgroups.Get(path)
	if err != nil {
		return cgroupSettings{}, fmt.Errorf("unable to get pod cgroup config for pod %q: %w", path, err)
	}
	s := settingsOfCgroup(c)
	r.recordPod(uid, s)
	return s, nil
}

// setPodCgroup writes the pod cgroup's settings.
func (r *Runtime) setPodCgroup(uid types.UID, path string, s cgroupSettings) error {
	if err := r.cgroups.Set(path, cgroupResources(s)); err != nil {
		return fmt.Errorf("set pod cgroup %s: %w", path, err)
	}
	r.recordPod(uid, s)
	return nil
}

// removePodCgroups removes the cgroup of a pod nothing runs in any more,
// in each QoS class's place (the pod's class is not known without its
// spec).
func (r *Runtime) removePodCgroups(uid types.UID) error {
	if r.cgroups == nil || !cgroupUID(uid) {
		return nil
	}
	for _, dir := range r.qosDirs() {
		if err := r.cgroups.Remove(dir + "/pod" + string(uid)); err != nil {
			return fmt.Errorf("remove pod cgroup: %w", err)
		}
	}
	r.forgetPodQoS(uid)
	return nil
}

// qosDirs are the cgroups pod cgroups are created in.
func (r *Runtime) qosDirs() []string {
	root := r.cfg.CgroupRoot
	return []string{root, root + "/burstable", root + "/besteffort"}
}

// podCgroupUIDs lists the UIDs of the pod cgroups that exist.
func (r *Runtime) podCgroupUIDs() ([]types.UID, error) {
	var out []types.UID
	for _, dir := range r.qosDirs() {
		if !r.cgroups.Exists(dir) {
			continue
		}
		names, err := r.cgroups.Children(dir)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if uid, ok := strings.CutPrefix(n, "pod"); ok && uid != "" {
				out = append(out, types.UID(uid))
			}
		}
	}
	return out, nil
}

// PodCgroupResources implements runtime.PodCgroupReader: the settings
// nodekit last gave the pod's cgroup (or read from it), converted as the
// kubelet reads them back: the CPU request from the shares, the limit
// from the quota, and the memory limit.
func (r *Runtime) PodCgroupResources(uid types.UID) (*runtime.ContainerResources, bool) {
	if r.cgroups == nil {
		return nil, false
	}
	s := r.recordedPod(uid)
	if s == nil {
		return nil, false
	}
	out := &runtime.ContainerResources{}
	if m := podutil.SharesToMilliCPU(s.shares); m > 0 {
		out.CPURequest = resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	if m := podutil.QuotaToMilliCPU(s.quota, podutil.QuotaPeriod); s.quota > 0 && m > 0 {
		out.CPULimit = resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	if s.memory > 0 {
		out.MemoryLimit = resource.NewQuantity(s.memory, resource.BinarySI)
	}
	return out, true
}
