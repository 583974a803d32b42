package cri

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// PodActions is what one SyncPod round must do for a pod, as decided by
// ComputePodActions.
type PodActions struct {
	// KillPod stops every container and sandbox of the pod first.
	KillPod bool
	// CreateSandbox creates a new sandbox with Attempt; otherwise
	// SandboxID is the ready sandbox to use.
	CreateSandbox bool
	SandboxID     string
	Attempt       uint32
	// NextInitContainer is the index in Spec.InitContainers of the init
	// container to start now, or -1. While init containers run, no
	// regular container starts.
	NextInitContainer int
	// ContainersToStart are indices in Spec.Containers.
	ContainersToStart []int
	// ContainersToKill are running containers to stop before anything
	// starts, with the reason.
	ContainersToKill []ContainerToKill
}

// ContainerToKill names a container SyncPod stops and why.
type ContainerToKill struct {
	ID      runtime.ContainerID
	Name    string
	Message string
}

// ComputePodActions decides, from a pod's spec and the runtime's latest
// observation of it, what SyncPod does next. It is a pure function: no
// I/O, no clock, and it does not mutate its arguments.
//
// The rules follow the kubelet:
//   - A pod needs a new sandbox when it has none, when the newest is not
//     ready, when several are ready, when the newest has no IP and the pod
//     is not on the host network, or when the host-network setting
//     changed. A new sandbox kills everything of the pod first and starts
//     all containers afresh (under OnFailure, not those that succeeded).
//     A pod with restartPolicy Never whose containers have already run
//     gets no new sandbox: it is done.
//   - Init containers run one at a time, in order; regular containers
//     start only once the last init container exited 0. A failed init
//     container is restarted unless the restart policy is Never, in which
//     case the pod is killed (it has failed).
//   - A regular container is (re)started when it has never run, is in the
//     created or unknown state, or has exited and the restart policy
//     (Always; OnFailure with a non-zero exit code) says so. A running
//     container whose spec hash changed is killed and restarted; one in
//     the unknown state is killed before it is replaced.
//   - When no container runs and none is to start, the pod is killed
//     (its sandbox stopped).
func ComputePodActions(pod *v1.Pod, status *runtime.PodStatus) PodActions {
	create, attempt, sandboxID := sandboxChanged(pod, status)
	a := PodActions{
		KillPod:           create,
		CreateSandbox:     create,
		SandboxID:         sandboxID,
		Attempt:           attempt,
		NextInitContainer: -1,
	}
	if create {
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever && attempt != 0 && len(status.ContainerStatuses) != 0 {
			a.CreateSandbox = false
			return a
		}
		var start []int
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && succeeded(c.Name, status) {
				continue
			}
			start = append(start, i)
		}
		if len(start) == 0 && len(pod.Spec.InitContainers) == 0 {
			a.CreateSandbox = false
			return a
		}
		if len(pod.Spec.InitContainers) > 0 {
			a.NextInitContainer = 0
			return a
		}
		a.ContainersToStart = start
		return a
	}

	if !initialized(pod, status) {
		failed, next, done := nextInitContainer(pod, status)
		if !done {
			switch {
			case failed >= 0:
				st := status.FindContainerStatus(pod.Spec.InitContainers[failed].Name)
				if st.State == runtime.ContainerStateUnknown {
					a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{ID: st.ID, Name: st.Name, Message: "Init container is in unknown state, will be restarted"})
				}
				if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
					a.KillPod = true
				} else {
					a.NextInitContainer = failed
				}
			case next >= 0:
				a.NextInitContainer = next
			}
			return a
		}
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		st := status.FindContainerStatus(c.Name)
		if st == nil || st.State != runtime.ContainerStateRunning {
			if st != nil && st.State == runtime.ContainerStateUnknown {
				a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{ID: st.ID, Name: c.Name, Message: "Container is in unknown state, will be restarted"})
			}
			if shouldRestart(pod, st) {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
			continue
		}
		if st.Hash != 0 && st.Hash != HashContainer(c) {
			a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{ID: st.ID, Name: c.Name, Message: "Container definition changed, will be restarted"})
			a.ContainersToStart = append(a.ContainersToStart, i)
			continue
		}
		keep++
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
	}
	return a
}

// sandboxChanged reports whether the pod needs a new sandbox, the attempt
// number it gets, and otherwise the ID of the sandbox to use.
func sandboxChanged(pod *v1.Pod, status *runtime.PodStatus) (bool, uint32, string) {
	if len(status.SandboxStatuses) == 0 {
		return true, 0, ""
	}
	ready := 0
	for _, s := range status.SandboxStatuses {
		if s.State == runtime.SandboxStateReady {
			ready++
		}
	}
	newest := status.SandboxStatuses[0]
	next := newest.Attempt + 1
	switch {
	case ready > 1, newest.State != runtime.SandboxStateReady:
		return true, next, newest.ID
	case (newest.NetworkMode == runtime.NamespaceModeNode) != pod.Spec.HostNetwork:
		return true, next, ""
	case !pod.Spec.HostNetwork && len(newest.IPs) == 0:
		return true, next, ""
	}
	return false, newest.Attempt, newest.ID
}

func succeeded(name string, status *runtime.PodStatus) bool {
	st := status.FindContainerStatus(name)
	return st != nil && st.State == runtime.ContainerStateExited && st.ExitCode == 0
}

// initialized reports whether the pod's init containers are behind it:
// there are none, or a regular container has already been created.
func initialized(pod *v1.Pod, status *runtime.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for i := range pod.Spec.Containers {
		if status.FindContainerStatus(pod.Spec.Containers[i].Name) != nil {
			return true
		}
	}
	return false
}

// nextInitContainer returns the index of a failed init container (or -1),
// the index of the next one to start (or -1), and whether all completed.
func nextInitContainer(pod *v1.Pod, status *runtime.PodStatus) (failed, next int, done bool) {
	inits := pod.Spec.InitContainers
	for i := len(inits) - 1; i >= 0; i-- {
		st := status.FindContainerStatus(inits[i].Name)
		if st != nil && (st.State == runtime.ContainerStateUnknown || (st.State == runtime.ContainerStateExited && st.ExitCode != 0)) {
			return i, -1, false
		}
	}
	for i := len(inits) - 1; i >= 0; i-- {
		st := status.FindContainerStatus(inits[i].Name)
		switch {
		case st == nil:
			continue
		case st.State == runtime.ContainerStateRunning:
			return -1, -1, false
		case st.State == runtime.ContainerStateExited:
			if i == len(inits)-1 {
				return -1, -1, true
			}
			return -1, i + 1, false
		case st.State == runtime.ContainerStateCreated:
			return -1, i, false
		}
	}
	return -1, 0, false
}

func shouldRestart(pod *v1.Pod, st *runtime.ContainerStatus) bool {
	if st == nil {
		return true
	}
	switch st.State {
	case runtime.ContainerStateRunning:
		return false
	case runtime.ContainerStateUnknown, runtime.ContainerStateCreated:
		return true
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return st.ExitCode != 0
	}
	return true
}
