package status

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// The kubelet's words for a container it lost track of.
const (
	reasonStatusUnknown = "ContainerStatusUnknown"
	// msgNotLocated: a container in the unknown state, or one left
	// unfinished in a pod's final status.
	msgNotLocated = "The container could not be located when the pod was terminated"
	// msgVanished: a container that ran and is no longer in the runtime.
	msgVanished = "The container could not be located when the pod was deleted.  The container used to be Running"
	// msgInitAssumed: an init container gone from the runtime of a pod
	// whose regular containers exist.
	msgInitAssumed = "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally"
	// exitUnknown is the exit code reported for a container whose end
	// was not seen.
	exitUnknown = 137
	// reasonRestartingAll: a container removed to restart all the pod's
	// containers, as its waiting reason and its last state's reason.
	reasonRestartingAll = "RestartingAllContainers"
	msgRestartingAll    = "The container was removed to restart all containers of the pod"
)

// containerStatuses builds the API statuses of one list of containers,
// as the kubelet's convertToAPIContainerStatuses does. hasInits makes a
// container without an instance wait with PodInitializing rather than
// ContainerCreating; isInit marks the init containers; restartingAll says
// the pod's containers are being restarted all together, so a container
// gone from the runtime was removed for that.
func containerStatuses(in Input, specs []v1.Container, rs *runtime.PodStatus, hasInits, isInit, restartingAll bool, previous []v1.ContainerStatus) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	pod := in.Pod
	waitReason := "ContainerCreating"
	if hasInits {
		waitReason = "PodInitializing"
	}
	out := make([]v1.ContainerStatus, 0, len(specs))
	for i := range specs {
		c := &specs[i]
		old := findStatus(previous, c.Name)
		newest, before := instances(rs, c.Name)
		var st v1.ContainerStatus
		switch {
		case newest != nil:
			st = convert(newest, old)
			carryOver(&st, newest, old)
			setContainerResources(&st, c, newest, old)
			if before != nil {
				st.LastTerminationState = convert(before, old).State
			}
		case restartingAll && old != nil && old.State.Waiting == nil:
			// Removed to restart all containers: it waits to start
			// again, and counts one more restart.
			if old.State.Terminated != nil {
				st = *old.DeepCopy()
			} else {
				st = v1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: old.RestartCount}
			}
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reasonRestartingAll, Message: msgRestartingAll}}
			st.LastTerminationState = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reasonRestartingAll, Message: msgRestartingAll, ExitCode: exitUnknown}}
			st.RestartCount = old.RestartCount + 1
		case old != nil && old.State.Terminated != nil:
			// The container is gone from the runtime; how it ended is
			// still known.
			st = *old.DeepCopy()
		default:
			st = v1.ContainerStatus{Name: c.Name, Image: c.Image, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: waitReason}}}
			if old != nil {
				st.RestartCount = old.RestartCount
				st.LastTerminationState = *old.LastTerminationState.DeepCopy()
				if old.State.Running != nil && st.LastTerminationState.Terminated == nil {
					// It ran and vanished: it stopped, with an unknown
					// end, rather than never having run.
					st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{Reason: reasonStatusUnknown, Message: msgVanished, ExitCode: exitUnknown}
					if pod.DeletionTimestamp == nil {
						st.RestartCount++
					}
				}
			}
		}
		if c.Image != "" {
			st.Image = c.Image
		}
		waitingReason(in, c, rs, newest, isInit, &st)
		probed(in, c, isInit, &st)
		out = append(out, st)
	}
	return out
}

// carryOver keeps, from a container's previous API status, what the
// runtime may have forgotten, as the kubelet does with its
// RestartAllContainersOnContainerExits feature (on by default since
// Kubernetes 1.37), which removes containers: the restart count never
// goes down, a new instance takes the previous one's termination as its
// last state (or keeps the last state the previous status had), and a
// container that runs again after the previous status showed it
// terminated counts one more restart when the runtime's count did not
// move. The instance before the newest, when the runtime still has it,
// gives the last state instead (the caller sets it afterwards).
func carryOver(st *v1.ContainerStatus, newest *runtime.ContainerStatus, old *v1.ContainerStatus) {
	if old == nil {
		return
	}
	st.RestartCount = max(st.RestartCount, old.RestartCount)
	switch {
	case old.ContainerID != st.ContainerID && old.State.Terminated != nil:
		st.LastTerminationState = v1.ContainerState{Terminated: old.State.Terminated.DeepCopy()}
	case old.LastTerminationState.Terminated != nil:
		st.LastTerminationState = v1.ContainerState{Terminated: old.LastTerminationState.Terminated.DeepCopy()}
	}
	if newest.State == runtime.ContainerStateRunning && old.State.Terminated != nil && int(old.RestartCount) >= newest.RestartCount {
		st.RestartCount = old.RestartCount + 1
	}
}

// waitingReason puts the last sync's failure (ErrImagePull,
// CrashLoopBackOff...) on a container that is to be started again, and
// treats an init container that vanished from an initialized pod as
// completed.
func waitingReason(in Input, c *v1.Container, rs *runtime.PodStatus, newest *runtime.ContainerStatus, isInit bool, st *v1.ContainerStatus) {
	if isInit {
		if newest != nil && newest.State == runtime.ContainerStateExited && newest.ExitCode == 0 {
			return // completed: it is not run again
		}
		if newest == nil && !isSidecar(c) && st.State.Waiting != nil && regularCreated(in.Pod, rs) {
			st.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed", Message: msgInitAssumed}}
			return
		}
	}
	if !toRestart(in.Pod, c, newest) {
		return
	}
	w, ok := in.Waiting[c.Name]
	if !ok {
		return
	}
	if st.State.Terminated != nil {
		st.LastTerminationState = st.State
	}
	st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
}

// toRestart is the kubelet's ShouldContainerBeRestarted: whether the
// next sync starts the container (again). One that exited restarts as its
// restart rules, its own restartPolicy or else the pod's say
// (podutil.ContainerShouldRestart).
func toRestart(pod *v1.Pod, c *v1.Container, newest *runtime.ContainerStatus) bool {
	switch {
	case pod.DeletionTimestamp != nil:
		return false
	case newest == nil:
		return true
	case newest.State == runtime.ContainerStateRunning:
		return false
	case newest.State == runtime.ContainerStateUnknown, newest.State == runtime.ContainerStateCreated:
		return true
	}
	return podutil.ContainerShouldRestart(c, &pod.Spec, int32(newest.ExitCode))
}

// probed sets started and ready from the probes' verdicts, as the
// kubelet's prober does.
func probed(in Input, c *v1.Container, isInit bool, st *v1.ContainerStatus) {
	running := st.State.Running != nil
	started := running
	if v, ok := in.Started[st.ContainerID]; ok {
		started = running && v
	} else if c.StartupProbe != nil {
		started = false
	}
	st.Started = boolPtr(started)
	if isInit && !isSidecar(c) {
		// A regular init container is ready once it has completed.
		st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
		return
	}
	ready := running && started
	if v, ok := in.Ready[st.ContainerID]; ok {
		ready = ready && v
	} else if c.ReadinessProbe != nil {
		ready = false
	}
	st.Ready = ready
}

// instances returns the newest and the one before of the named
// container (statuses are newest first).
func instances(rs *runtime.PodStatus, name string) (newest, before *runtime.ContainerStatus) {
	for _, cs := range rs.ContainerStatuses {
		if cs.Name != name {
			continue
		}
		if newest == nil {
			newest = cs
			continue
		}
		return newest, cs
	}
	return newest, nil
}

// regularCreated reports whether any regular container of the pod exists
// in the runtime.
func regularCreated(pod *v1.Pod, rs *runtime.PodStatus) bool {
	for i := range pod.Spec.Containers {
		if rs.FindContainerStatus(pod.Spec.Containers[i].Name) != nil {
			return true
		}
	}
	return false
}

// convert is the API status of one container instance. old is the
// container's previous API status: a container in the unknown state that
// was running is reported terminated with an unknown end.
func convert(cs *runtime.ContainerStatus, old *v1.ContainerStatus) v1.ContainerStatus {
	st := v1.ContainerStatus{
		Name:         cs.Name,
		Image:        cs.Image,
		ImageID:      cs.ImageRef,
		ContainerID:  cs.ID.String(),
		RestartCount: int32(cs.RestartCount),
	}
	switch {
	case cs.State == runtime.ContainerStateRunning:
		st.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}
	case cs.State == runtime.ContainerStateExited:
		st.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode:    int32(cs.ExitCode),
			Reason:      cs.Reason,
			Message:     cs.Message,
			StartedAt:   metav1.NewTime(cs.StartedAt),
			FinishedAt:  metav1.NewTime(cs.FinishedAt),
			ContainerID: st.ContainerID,
		}
	case cs.State == runtime.ContainerStateUnknown && old != nil && old.State.Running != nil:
		st.State.Terminated = &v1.ContainerStateTerminated{Reason: reasonStatusUnknown, Message: msgNotLocated, ExitCode: exitUnknown}
		st.RestartCount = old.RestartCount + 1
	default:
		// Created, or unknown without a record of running: waiting.
		st.State.Waiting = &v1.ContainerStateWaiting{}
	}
	return st
}

func boolPtr(b bool) *bool { return &b }
