package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// ReasonResizeError is the reason of a resize step that failed, the
// kubelet's.
const ReasonResizeError = "ResizePodInPlaceError"

// ContainerToResize is a running container whose CPU or memory settings
// differ from those its spec asks for, to be updated in place (its
// resize policy for each changed resource is NotRequired).
type ContainerToResize struct {
	ID   runtime.ContainerID
	Name string
	// Init: Index is in Spec.InitContainers; otherwise in Spec.Containers.
	Init  bool
	Index int
	// Memory and CPU tell which settings change.
	Memory, CPU bool
}

// actualSettings looks up the settings a running container has: those
// nodekit last gave it (at its creation or its last resize), else those
// the runtime reports. ok is false when neither is known.
type actualSettings func(st *runtime.ContainerStatus) (s cgroupSettings, ok bool)

// reportedSettings are the settings the runtime reports for a container.
func reportedSettings(st *runtime.ContainerStatus) (cgroupSettings, bool) {
	r := st.Resources
	if r == nil {
		return cgroupSettings{}, false
	}
	s := cgroupSettings{shares: podutil.MinShares}
	if r.CPURequest != nil {
		s.shares = podutil.MilliCPUToShares(r.CPURequest.MilliValue())
	}
	if r.CPULimit != nil {
		s.quota = podutil.MilliCPUToQuota(r.CPULimit.MilliValue(), podutil.QuotaPeriod)
	}
	if r.MemoryLimit != nil {
		s.memory = r.MemoryLimit.Value()
	}
	return s, true
}

// settingsOf are the settings in CRI Linux resources.
func settingsOf(l *runtimeapi.LinuxContainerResources) cgroupSettings {
	s := cgroupSettings{shares: l.GetCpuShares(), quota: l.GetCpuQuota(), memory: l.GetMemoryLimitInBytes()}
	if s.quota < 0 {
		s.quota = 0
	}
	if s.memory < 0 {
		s.memory = 0
	}
	return s
}

// resizeNeeded compares a running container's settings with those of its
// spec: which resources differ, and whether the resize policy of one of
// them restarts the container.
func resizeNeeded(pod *v1.Pod, c *v1.Container, st *runtime.ContainerStatus, actual actualSettings) (memory, cpu, restart bool) {
	if actual == nil {
		return false, false, false
	}
	have, ok := actual(st)
	if !ok {
		return false, false, false
	}
	want := containerSettings(pod, c)
	memory = want.memory != have.memory
	cpu = want.shares != have.shares || want.quota != have.quota
	restart = (memory && restartsOnResize(c, v1.ResourceMemory)) || (cpu && restartsOnResize(c, v1.ResourceCPU))
	return memory, cpu, restart
}

// restartsOnResize reports whether the container's resize policy for the
// resource is RestartContainer (the default is NotRequired).
func restartsOnResize(c *v1.Container, name v1.ResourceName) bool {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy == v1.RestartContainer
		}
	}
	return false
}

// resizeMessage is the kill message of a container restarted to resize
// it, the kubelet's.
func resizeMessage(name string) string { return "Container " + name + " resize requires restart" }

// actuated remembers the settings nodekit gave each running container of
// each pod, at its creation or its last in-place resize, and the pod
// cgroup's. Runtimes report a container's settings, but rounded (and not
// all of them do).
type actuated struct {
	containers map[string]cgroupSettings // by container ID
	pod        *cgroupSettings
}

func (r *Runtime) recordContainer(uid types.UID, id string, s cgroupSettings) {
	r.actMu.Lock()
	defer r.actMu.Unlock()
	a := r.act[uid]
	if a == nil {
		a = &actuated{containers: map[string]cgroupSettings{}}
		r.act[uid] = a
	}
	a.containers[id] = s
}

func (r *Runtime) recordPod(uid types.UID, s cgroupSettings) {
	r.actMu.Lock()
	defer r.actMu.Unlock()
	a := r.act[uid]
	if a == nil {
		a = &actuated{containers: map[string]cgroupSettings{}}
		r.act[uid] = a
	}
	a.pod = &s
}

// forgetActuated drops what is remembered of a pod: all of it, or, with
// keep, the containers not in keep.
func (r *Runtime) forgetActuated(uid types.UID, keep map[string]bool) {
	r.actMu.Lock()
	defer r.actMu.Unlock()
	if keep == nil {
		delete(r.act, uid)
		return
	}
	if a := r.act[uid]; a != nil {
		for id := range a.containers {
			if !keep[id] {
				delete(a.containers, id)
			}
		}
	}
}

// actualFor is the actualSettings of a pod's containers.
func (r *Runtime) actualFor(uid types.UID) actualSettings {
	return func(st *runtime.ContainerStatus) (cgroupSettings, bool) {
		r.actMu.Lock()
		a := r.act[uid]
		var s cgroupSettings
		ok := false
		if a != nil {
			s, ok = a.containers[st.ID.ID]
		}
		r.actMu.Unlock()
		if ok {
			return s, true
		}
		return reportedSettings(st)
	}
}

// resize carries out an in-place resize: the containers' new settings
// and the pod cgroup's, in the kubelet's order. A memory limit is never
// lowered below what the pod uses (the step fails, naming both, and
// nothing changes); a limit is raised on the pod cgroup before its
// containers', and lowered on it after theirs.
func (r *Runtime) resize(ctx context.Context, pod *v1.Pod, list []ContainerToResize, qos v1.PodQOSClass) runtime.SyncStep {
	fail := func(err error) runtime.SyncStep {
		return runtime.SyncStep{Action: runtime.ActionResize, Target: podRef(pod), Err: fmt.Errorf("pod %s: resize: %w", podRef(pod), err), Reason: ReasonResizeError, Message: err.Error()}
	}
	path := r.podCgroupPath(pod)
	var podHave, podWant cgroupSettings
	podChange := false
	if path != "" {
		want := podCgroupSettings(pod)
		have, err := r.podCgroupHave(pod.UID, path)
		if err != nil {
			return fail(err)
		}
		podHave, podWant, podChange = have, want, have != want
	}
	if len(list) == 0 && !podChange {
		return runtime.SyncStep{}
	}
	// The memory limits that go down must stay above the usage.
	var problems []string
	if podChange && podWant.memory > 0 && (podHave.memory == 0 || podWant.memory < podHave.memory) {
		usage, err := r.cgroups.MemoryUsage(path)
		if err != nil {
			return fail(fmt.Errorf("unable to read memory usage for pod %q: %w", podRef(pod), err))
		}
		if usage >= podWant.memory {
			problems = append(problems, fmt.Sprintf("attempting to set pod memory limit (%d) below current usage (%d)", podWant.memory, usage))
		}
	}
	actual := r.actualFor(pod.UID)
	type update struct {
		c        ContainerToResize
		spec     *v1.Container
		id       string
		want     *runtimeapi.LinuxContainerResources
		have     cgroupSettings
		decrease bool
	}
	var updates []update
	for _, c := range list {
		spec := &pod.Spec.Containers[c.Index]
		if c.Init {
			spec = &pod.Spec.InitContainers[c.Index]
		}
		have, _ := actual(&runtime.ContainerStatus{ID: c.ID})
		want := r.linuxResources(pod, spec, qos)
		ws := settingsOf(want)
		u := update{c: c, spec: spec, id: c.ID.ID, want: want, have: have}
		u.decrease = lower(ws.memory, have.memory) || lower(ws.quota, have.quota) || ws.shares < have.shares
		if c.Memory && lower(ws.memory, have.memory) {
			usage, err := r.containerMemoryUsage(ctx, path, c.ID.ID)
			if err != nil {
				return fail(fmt.Errorf("missing container %q memory usage: %w", c.Name, err))
			}
			if usage >= ws.memory {
				problems = append(problems, fmt.Sprintf("attempting to set container %q memory limit (%d) below current usage (%d)", c.Name, ws.memory, usage))
			}
		}
		updates = append(updates, u)
	}
	switch len(problems) {
	case 0:
	case 1:
		return fail(errors.New("cannot decrease memory limits: " + problems[0]))
	default:
		return fail(errors.New("cannot decrease memory limits: [" + strings.Join(problems, ", ") + "]"))
	}
	// Raise the pod cgroup's limits, then the containers' (decreases
	// first), then lower the pod cgroup's.
	if podChange {
		raised := podHave
		if !lower(podWant.memory, podHave.memory) {
			raised.memory = podWant.memory
		}
		if !lower(podWant.quota, podHave.quota) {
			raised.quota = podWant.quota
		}
		if podWant.shares > podHave.shares {
			raised.shares = podWant.shares
		}
		if raised != podHave {
			if err := r.setPodCgroup(pod.UID, path, raised); err != nil {
				return fail(err)
			}
		}
	}
	ordered := make([]update, 0, len(updates))
	for _, u := range updates {
		if u.decrease {
			ordered = append(ordered, u)
		}
	}
	for _, u := range updates {
		if !u.decrease {
			ordered = append(ordered, u)
		}
	}
	for _, u := range ordered {
		err := r.rs.UpdateContainerResources(ctx, u.id, &runtimeapi.ContainerResources{Linux: u.want})
		if err != nil {
			return fail(criclient.Wrap("UpdateContainerResources", u.c.Name, err))
		}
		r.recordContainer(pod.UID, u.id, settingsOf(u.want))
		r.log.V(2).Info("resized container", "pod", podRef(pod), "container", u.c.Name, "containerID", u.id,
			"cpuShares", u.want.GetCpuShares(), "cpuQuota", u.want.GetCpuQuota(), "memoryLimit", u.want.GetMemoryLimitInBytes())
	}
	if podChange {
		if err := r.setPodCgroup(pod.UID, path, podWant); err != nil {
			return fail(err)
		}
	}
	return runtime.SyncStep{Action: runtime.ActionResize, Target: podRef(pod)}
}

// lower reports whether limit a is below limit b, where 0 is no limit.
func lower(a, b int64) bool { return a > 0 && (b == 0 || a < b) }

// containerMemoryUsage is the memory the pod uses, from its cgroup, as
// the kubelet checks a container's new limit against; without pod
// cgroups, the container's own usage as the runtime reports it.
func (r *Runtime) containerMemoryUsage(ctx context.Context, podPath, id string) (int64, error) {
	if podPath != "" {
		return r.cgroups.MemoryUsage(podPath)
	}
	st, err := r.rs.ContainerStats(ctx, id)
	if err != nil {
		return 0, criclient.Wrap("ContainerStats", id, err)
	}
	if m := st.GetMemory(); m != nil && m.GetUsageBytes() != nil {
		return int64(m.GetUsageBytes().GetValue()), nil
	}
	return 0, errors.New("the runtime reports none")
}

// forgetExited drops what is remembered of the pod's containers that
// have exited, so the record holds running containers only.
func (r *Runtime) forgetExited(uid types.UID, status *runtime.PodStatus) {
	r.actMu.Lock()
	defer r.actMu.Unlock()
	a := r.act[uid]
	if a == nil {
		return
	}
	for _, st := range status.ContainerStatuses {
		if st.State == runtime.ContainerStateExited {
			delete(a.containers, st.ID.ID)
		}
	}
}

// podCgroupChanged reports whether the pod's cgroup, which nodekit
// manages, has other settings than its spec asks for.
func (r *Runtime) podCgroupChanged(pod *v1.Pod) bool {
	path := r.podCgroupPath(pod)
	if path == "" || pod.DeletionTimestamp != nil {
		return false
	}
	r.actMu.Lock()
	a := r.act[pod.UID]
	var have *cgroupSettings
	if a != nil {
		have = a.pod
	}
	r.actMu.Unlock()
	if have == nil {
		// Not created or not read by this process yet: ensurePodCgroup
		// or the resize step reads it.
		return r.cgroups.Exists(path)
	}
	return *have != podCgroupSettings(pod)
}
