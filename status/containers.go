package status

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
)

// containerStatuses builds the API statuses of one list of containers.
// initializing marks regular containers whose pod is still running init
// containers: they wait with PodInitializing.
func containerStatuses(in Input, specs []v1.Container, rs *runtime.PodStatus, initializing bool, previous []v1.ContainerStatus) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	out := make([]v1.ContainerStatus, 0, len(specs))
	for i := range specs {
		c := &specs[i]
		instances := rs.ContainerStatusesByName(c.Name)
		st := v1.ContainerStatus{Name: c.Name, Image: c.Image}
		if len(instances) == 0 {
			reason := "ContainerCreating"
			if initializing {
				reason = "PodInitializing"
			}
			st.State.Waiting = &v1.ContainerStateWaiting{Reason: reason}
			if w, ok := in.Waiting[c.Name]; ok {
				st.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
			}
			st.Started = boolPtr(false)
			out = append(out, st)
			continue
		}
		newest := instances[0]
		st.ContainerID = newest.ID.String()
		st.ImageID = newest.ImageRef
		if newest.Image != "" && c.Image == "" {
			st.Image = newest.Image
		}
		st.RestartCount = int32(newest.RestartCount)
		st.State = state(newest)
		if len(instances) > 1 {
			st.LastTerminationState = state(instances[1])
		}
		if newest.State != runtime.ContainerStateRunning {
			if w, ok := in.Waiting[c.Name]; ok {
				// The container is to be restarted but could not be:
				// waiting with the reason, the exit as the last state.
				st.LastTerminationState = st.State
				st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
			}
		}
		running := newest.State == runtime.ContainerStateRunning
		started := running
		if v, ok := in.Started[st.ContainerID]; ok {
			started = running && v
		} else if c.StartupProbe != nil {
			started = false
		}
		st.Started = boolPtr(started)
		ready := running && started
		if v, ok := in.Ready[st.ContainerID]; ok {
			ready = ready && v
		} else if c.ReadinessProbe != nil {
			ready = false
		}
		st.Ready = ready
		out = append(out, st)
	}
	return out
}

func boolPtr(b bool) *bool { return &b }

func state(c *runtime.ContainerStatus) v1.ContainerState {
	switch c.State {
	case runtime.ContainerStateRunning:
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}}
	case runtime.ContainerStateExited:
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode:    int32(c.ExitCode),
			Reason:      c.Reason,
			Message:     c.Message,
			StartedAt:   metav1.NewTime(c.StartedAt),
			FinishedAt:  metav1.NewTime(c.FinishedAt),
			ContainerID: c.ID.String(),
		}}
	case runtime.ContainerStateUnknown:
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 137, Reason: "ContainerStatusUnknown",
			Message: "The container could not be located when the pod was terminated", ContainerID: c.ID.String(),
		}}
	}
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
}
