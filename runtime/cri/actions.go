package cri

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// ProbeResult is the latest outcome of a container's probe.
type ProbeResult int8

// Probe outcomes. ProbeUnknown is what a probe reports before it has run.
const (
	ProbeUnknown ProbeResult = iota
	ProbeSuccess
	ProbeFailure
)

// ProbeResults tells the runtime what liveness and startup probes last
// said about running containers; nodekit's probes package implements it.
// Methods must be cheap and safe for concurrent use.
type ProbeResults interface {
	Liveness(id runtime.ContainerID) ProbeResult
	Startup(id runtime.ContainerID) ProbeResult
}

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
	// InitContainersToStart are indices in Spec.InitContainers, in order:
	// restartable init containers (sidecars) to (re)start and at most one
	// regular init container, always last.
	InitContainersToStart []int
	// ContainersToStart are indices in Spec.Containers.
	ContainersToStart []int
	// EphemeralContainersToStart are indices in Spec.EphemeralContainers.
	EphemeralContainersToStart []int
	// ContainersToKill are containers to stop before anything starts.
	ContainersToKill []ContainerToKill
}

// ContainerToKill names a container SyncPod stops and why.
type ContainerToKill struct {
	ID      runtime.ContainerID
	Name    string
	Message string
	// GracePeriod, when set, is the failing probe's own
	// terminationGracePeriodSeconds, which replaces the pod's.
	GracePeriod *int64
}

// IsRestartableInit reports whether an init container is a sidecar: an
// init container with restartPolicy Always.
func IsRestartableInit(c *v1.Container) bool { return podutil.IsRestartableInit(c) }

// ComputePodActions decides, from a pod's spec, the runtime's latest
// observation of it and the probes' latest results (nil when there are
// no probes), what SyncPod does next. It is a pure function: no I/O, no
// clock, and it does not mutate its arguments. Restart back-off is not
// decided here; SyncPod applies it when it starts what this returns.
//
// The rules follow the kubelet:
//   - A pod needs a new sandbox when it has none, when the newest is not
//     ready, when several are ready, when the newest has no IP and the pod
//     is not on the host network, or when the host-network setting
//     changed. A new sandbox kills everything of the pod first and starts
//     afresh: the first init container, or else all containers (under
//     OnFailure, not those that succeeded). A pod with restartPolicy Never
//     whose containers have already run gets no new sandbox: it is done.
//   - Init containers run in order. A regular init container must exit 0
//     before the next one starts; a restartable init container (sidecar)
//     must be running, and past its startup probe if it has one. Regular
//     containers start once all init containers are through. A failed
//     regular init container is restarted unless the restart policy is
//     Never, in which case the pod is killed (it has failed).
//   - Sidecars are restarted whenever they stop, whatever the pod's
//     restart policy, until the pod is done.
//   - A regular container is (re)started when it has never run, is in the
//     created or unknown state, or has exited and the restart policy
//     (Always; OnFailure with a non-zero exit code) says so.
//   - A running container (sidecar or regular) whose spec hash changed is
//     killed and restarted whatever the policy; one whose liveness or
//     startup probe failed is killed and restarted unless the policy is
//     Never; one in the unknown state is killed before it is replaced.
//   - Ephemeral containers start once, when they appear in the spec, and
//     are never restarted.
//   - When no regular container runs and none is to start, the pod is
//     killed: sidecars do not keep a finished pod alive.
func ComputePodActions(pod *v1.Pod, status *runtime.PodStatus, probes ProbeResults) PodActions {
	return computePodActions(pod, status, probes, HashContainer)
}

// computePodActions is ComputePodActions with the spec hash function as a
// parameter, so a Runtime can use its cache.
func computePodActions(pod *v1.Pod, status *runtime.PodStatus, probes ProbeResults, hash func(*v1.Container) uint64) PodActions {
	create, attempt, sandboxID := runtime.SandboxChanged(pod, status)
	a := PodActions{
		KillPod:       create,
		CreateSandbox: create,
		SandboxID:     sandboxID,
		Attempt:       attempt,
	}
	if create {
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever && attempt != 0 && len(status.ContainerStatuses) != 0 {
			a.CreateSandbox = false
			return a
		}
		var start []int
		for i := range pod.Spec.Containers {
			if pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && succeeded(pod.Spec.Containers[i].Name, status) {
				continue
			}
			start = append(start, i)
		}
		switch {
		case len(start) == 0:
			a.CreateSandbox = false
		case len(pod.Spec.InitContainers) > 0:
			a.InitContainersToStart = []int{0}
		default:
			a.ContainersToStart = start
		}
		return a
	}

	for i := range pod.Spec.EphemeralContainers {
		if status.FindContainerStatus(pod.Spec.EphemeralContainers[i].Name) == nil {
			a.EphemeralContainersToStart = append(a.EphemeralContainersToStart, i)
		}
	}

	if !a.initActions(pod, status, probes, hash) {
		return a
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		st := status.FindContainerStatus(c.Name)
		if st == nil || st.State != runtime.ContainerStateRunning {
			if st != nil && st.State == runtime.ContainerStateUnknown {
				a.kill(st, "Container is in unknown state, will be restarted")
			}
			if shouldRestart(pod, st) {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
			continue
		}
		msg, restart := runningContainerProblem(pod, c, st, probes, hash)
		if msg == "" {
			keep++
			continue
		}
		if restart {
			msg += ", will be restarted"
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
		a.kill(st, msg)
		a.ContainersToKill[len(a.ContainersToKill)-1].GracePeriod = probeGrace(c, st, probes)
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
		a.InitContainersToStart = nil // sidecars do not keep a finished pod alive
	}
	return a
}

// probeGrace is the terminationGracePeriodSeconds of the probe whose
// failure kills the container, if it sets one.
func probeGrace(c *v1.Container, st *runtime.ContainerStatus, probes ProbeResults) *int64 {
	if probes == nil {
		return nil
	}
	if p := c.LivenessProbe; p != nil && probes.Liveness(st.ID) == ProbeFailure {
		return p.TerminationGracePeriodSeconds
	}
	if p := c.StartupProbe; p != nil && probes.Startup(st.ID) == ProbeFailure {
		return p.TerminationGracePeriodSeconds
	}
	return nil
}

func (a *PodActions) kill(st *runtime.ContainerStatus, msg string) {
	a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{ID: st.ID, Name: st.Name, Message: msg})
}

// runningContainerProblem returns why a running container must be killed
// ("" when it is fine) and whether it is then restarted.
func runningContainerProblem(pod *v1.Pod, c *v1.Container, st *runtime.ContainerStatus, probes ProbeResults, hash func(*v1.Container) uint64) (string, bool) {
	if st.Hash != 0 && st.Hash != hash(c) {
		return "Container " + c.Name + " definition changed", true
	}
	restart := pod.Spec.RestartPolicy != v1.RestartPolicyNever
	if probes != nil {
		if probes.Liveness(st.ID) == ProbeFailure {
			return "Container " + c.Name + " failed liveness probe", restart
		}
		if probes.Startup(st.ID) == ProbeFailure {
			return "Container " + c.Name + " failed startup probe", restart
		}
	}
	return "", false
}

// initActions adds the init-container actions and reports whether the
// pod is through its init containers, so regular containers may run.
func (a *PodActions) initActions(pod *v1.Pod, status *runtime.PodStatus, probes ProbeResults, hash func(*v1.Container) uint64) bool {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	// Once a regular container exists, initialization is over: regular
	// init containers do not run again, sidecars are kept running.
	initialized := false
	for i := range pod.Spec.Containers {
		if status.FindContainerStatus(pod.Spec.Containers[i].Name) != nil {
			initialized = true
			break
		}
	}
	for i := range inits {
		c := &inits[i]
		st := status.FindContainerStatus(c.Name)
		if IsRestartableInit(c) {
			if st == nil {
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				if !initialized {
					return false
				}
				continue
			}
			switch st.State {
			case runtime.ContainerStateRunning:
				if msg, _ := runningContainerProblem(pod, c, st, probes, hash); msg != "" {
					a.kill(st, msg+", will be restarted")
					a.InitContainersToStart = append(a.InitContainersToStart, i)
					if !initialized {
						return false
					}
					continue
				}
				if !initialized && !sidecarStarted(c, st, probes) {
					return false
				}
			default:
				if st.State == runtime.ContainerStateUnknown {
					a.kill(st, "Init container is in unknown state, will be restarted")
				}
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				if !initialized {
					return false
				}
			}
			continue
		}
		if initialized {
			continue
		}
		if st == nil {
			a.InitContainersToStart = append(a.InitContainersToStart, i)
			return false
		}
		switch {
		case st.State == runtime.ContainerStateRunning:
			return false
		case st.State == runtime.ContainerStateExited && st.ExitCode == 0:
			continue
		}
		// Failed, never started, or unknown.
		if st.State == runtime.ContainerStateUnknown {
			a.kill(st, "Init container is in unknown state, will be restarted")
		}
		if st.State == runtime.ContainerStateExited && pod.Spec.RestartPolicy == v1.RestartPolicyNever {
			a.KillPod = true
			a.InitContainersToStart = nil
			return false
		}
		a.InitContainersToStart = append(a.InitContainersToStart, i)
		return false
	}
	return true
}

// sidecarStarted reports whether a running sidecar lets the next init
// container start: it has no startup probe, or the probe succeeded (or
// there is no prober to ask).
func sidecarStarted(c *v1.Container, st *runtime.ContainerStatus, probes ProbeResults) bool {
	if c.StartupProbe == nil || probes == nil {
		return true
	}
	return probes.Startup(st.ID) == ProbeSuccess
}

func succeeded(name string, status *runtime.PodStatus) bool {
	st := status.FindContainerStatus(name)
	return st != nil && st.State == runtime.ContainerStateExited && st.ExitCode == 0
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
