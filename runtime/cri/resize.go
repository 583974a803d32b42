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

// containerHave is what a running container was given: the values
// nodekit recorded when it started or last resized it, else (recorded
// false) the cgroup settings the runtime reports.
type containerHave struct {
	values   containerValues
	recorded bool
	settings cgroupSettings
}

// actualSettings looks up what a running container was given; ok is
// false when neither nodekit nor the runtime knows.
type actualSettings func(st *runtime.ContainerStatus) (h containerHave, ok bool)

// reportedSettings is the containerHave the runtime reports.
func reportedSettings(st *runtime.ContainerStatus) (containerHave, bool) {
	r := st.Resources
	if r == nil {
		return containerHave{}, false
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
	return containerHave{settings: s}, true
}

// resizeNeeded compares what a running container was given with what its
// spec asks for, as the kubelet does: its CPU request and limit and its
// memory request and limit (where nodekit recorded them; else the cgroup
// settings the runtime reports, in which a memory request does not
// show). It tells which resources differ, and whether the resize policy
// of one of them restarts the container.
func resizeNeeded(pod *v1.Pod, c *v1.Container, st *runtime.ContainerStatus, actual actualSettings) (memory, cpu, restart bool) {
	if actual == nil {
		return false, false, false
	}
	have, ok := actual(st)
	if !ok {
		return false, false, false
	}
	want := valuesOf(pod, c)
	if have.recorded {
		h := have.values
		memory = want.memLim != h.memLim || want.memReq != h.memReq
		cpu = want.cpuLim != h.cpuLim || want.cpuReq != h.cpuReq || want.settings().shares != h.settings().shares
	} else {
		ws := want.settings()
		memory = ws.memory != have.settings.memory
		cpu = ws.shares != have.settings.shares || ws.quota != have.settings.quota
	}
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

// actuated remembers what nodekit gave each running container of each
// pod, at its creation or its last in-place resize, and the pod
// cgroup's settings, as the kubelet's actuated state. Runtimes report a
// container's settings, but rounded, without the memory request (and not
// all of them report any).
type actuated struct {
	containers map[string]containerValues // by container ID
	pod        *cgroupSettings
}

func (r *Runtime) recordContainer(uid types.UID, id string, v containerValues) {
	r.actMu.Lock()
	defer r.actMu.Unlock()
	a := r.act[uid]
	if a == nil {
		a = &actuated{containers: map[string]containerValues{}}
		r.act[uid] = a
	}
	a.containers[id] = v
}

func (r *Runtime) recordPod(uid types.UID, s cgroupSettings) {
	r.actMu.Lock()
	defer r.actMu.Unlock()
	a := r.act[uid]
	if a == nil {
		a = &actuated{containers: map[string]containerValues{}}
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

// recordedContainer is what nodekit recorded giving a container.
func (r *Runtime) recordedContainer(uid types.UID, id string) (containerValues, bool) {
	r.actMu.Lock()
	defer r.actMu.Unlock()
	if a := r.act[uid]; a != nil {
		v, ok := a.containers[id]
		return v, ok
	}
	return containerValues{}, false
}

// recordedPod is a copy of the pod cgroup settings nodekit recorded, or
// nil.
func (r *Runtime) recordedPod(uid types.UID) *cgroupSettings {
	r.actMu.Lock()
	defer r.actMu.Unlock()
	if a := r.act[uid]; a != nil && a.pod != nil {
		s := *a.pod
		return &s
	}
	return nil
}

// actualFor is the actualSettings of a pod's containers.
func (r *Runtime) actualFor(uid types.UID) actualSettings {
	return func(st *runtime.ContainerStatus) (containerHave, bool) {
		if v, ok := r.recordedContainer(uid, st.ID.ID); ok {
			return containerHave{values: v, recorded: true, settings: v.settings()}, true
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
		values   containerValues
		decrease bool
	}
	var updates []update
	for _, c := range list {
		spec := &pod.Spec.Containers[c.Index]
		if c.Init {
			spec = &pod.Spec.InitContainers[c.Index]
		}
		h, _ := actual(&runtime.ContainerStatus{ID: c.ID})
		have := h.settings
		values := valuesOf(pod, spec)
		ws := values.settings()
		u := update{c: c, spec: spec, id: c.ID.ID, want: r.linuxResources(pod, spec, qos), values: values}
		u.decrease = lower(ws.memory, have.memory) || lower(ws.quota, have.quota) || ws.shares < have.shares
		if c.Memory && lower(ws.memory, have.memory) {
			usage, err := r.containerMemoryUsage(ctx, c.ID.ID)
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
		r.recordContainer(pod.UID, u.id, u.values)
		r.log.V(2).Info("resized container", "pod", podRef(pod), "container", u.c.Name, "containerID", u.id,
			"cpuShares", u.want.GetCpuShares(), "cpuQuota", u.want.GetCpuQuota(), "memoryLimit", u.want.GetMemoryLimitInBytes())
	}
	if podChange {
		if err := r.setPodCgroup(pod.UID, path, podWant); err != nil {
			return fail(err)
		}
		r.notePodQoS(pod, true)
	}
	return runtime.SyncStep{Action: runtime.ActionResize, Target: podRef(pod)}
}

// lower reports whether limit a is below limit b, where 0 is no limit.
func lower(a, b int64) bool { return a > 0 && (b == 0 || a < b) }

// containerMemoryUsage is the memory the container uses, as the runtime
// reports it, which the kubelet checks a container's new limit against.
func (r *Runtime) containerMemoryUsage(ctx context.Context, id string) (int64, error) {
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
	have := r.recordedPod(pod.UID)
	if have == nil {
		// Not created or not read by this process yet: ensurePodCgroup
		// or the resize step reads it.
		return r.cgroups.Exists(path)
	}
	return *have != podCgroupSettings(pod)
}

// addActuated completes what the runtime reports of a running container's
// resources with what nodekit recorded giving it, as the kubelet does
// from its actuated state: the memory request, which no cgroup setting
// shows, and everything when the runtime reports nothing.
func (r *Runtime) addActuated(uid types.UID, st *runtime.ContainerStatus) {
	v, ok := r.recordedContainer(uid, st.ID.ID)
	if !ok {
		return
	}
	rec := v.resources()
	if st.Resources == nil {
		st.Resources = rec
		return
	}
	st.Resources.MemoryRequest = rec.MemoryRequest
}

// ResizeInProgress implements runtime.ResizeChecker, as the kubelet's
// IsPodResizeInProgress: some running container (regular, sidecar or
// init) of the observation was given other requests or limits than the
// spec has, or the pod cgroup other settings.
func (r *Runtime) ResizeInProgress(pod *v1.Pod, status *runtime.PodStatus) bool {
	actual := r.actualFor(pod.UID)
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			st := status.FindContainerStatus(list[i].Name)
			if st == nil || st.State != runtime.ContainerStateRunning {
				continue
			}
			if memory, cpu, _ := resizeNeeded(pod, &list[i], st, actual); memory || cpu {
				return true
			}
		}
	}
	return r.podCgroupChanged(pod)
}
