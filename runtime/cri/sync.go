package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// The waiting reasons SyncPod reports, the kubelet's.
const (
	ReasonCreatePodSandboxError      = "CreatePodSandboxError"
	ReasonKillPodError               = "KillPodError"
	ReasonKillContainerError         = "KillContainerError"
	ReasonErrImagePull               = "ErrImagePull"
	ReasonErrImageNeverPull          = "ErrImageNeverPull"
	ReasonInvalidImageName           = "InvalidImageName"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
)

// SyncPod implements runtime.Runtime: it computes the pod's actions with
// ComputePodActions and carries them out. A failure to start one container
// does not stop the others from starting.
func (r *Runtime) SyncPod(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus) *runtime.SyncResult {
	res := &runtime.SyncResult{}
	if status == nil {
		status = &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	a := ComputePodActions(pod, status)
	log := r.log.WithValues("pod", podRef(pod), "podUID", pod.UID)

	if a.KillPod {
		if running := runningPodFromStatus(status, a.CreateSandbox); len(running.Containers)+len(running.Sandboxes) > 0 {
			err := r.killPod(ctx, pod, running, nil)
			res.Add(step(runtime.ActionKillPod, podRef(pod), err, ReasonKillPodError))
			if err != nil {
				return res
			}
		}
		if !a.CreateSandbox {
			return res
		}
	} else {
		for _, k := range a.ContainersToKill {
			log.V(2).Info("killing container", "container", k.Name, "containerID", k.ID.String(), "reason", k.Message)
			err := r.killContainer(ctx, pod, k.ID.ID, k.Name, nil)
			res.Add(step(runtime.ActionKillContainer, k.Name, err, ReasonKillContainerError))
			if err != nil {
				return res
			}
		}
	}

	sandboxConfig := r.sandboxConfig(pod, a.Attempt)
	sandboxID := a.SandboxID
	if a.CreateSandbox {
		id, err := r.createSandbox(ctx, sandboxConfig)
		res.Add(step(runtime.ActionCreateSandbox, podRef(pod), err, ReasonCreatePodSandboxError))
		if err != nil {
			return res
		}
		log.V(2).Info("created sandbox", "sandboxID", id, "attempt", a.Attempt)
		sandboxID = id
	}

	if a.NextInitContainer >= 0 {
		c := &pod.Spec.InitContainers[a.NextInitContainer]
		res.Add(r.startContainer(ctx, pod, c, status, sandboxID, sandboxConfig))
		return res
	}
	for _, i := range a.ContainersToStart {
		res.Add(r.startContainer(ctx, pod, &pod.Spec.Containers[i], status, sandboxID, sandboxConfig))
	}
	return res
}

func step(action runtime.SyncAction, target string, err error, reason string) runtime.SyncStep {
	s := runtime.SyncStep{Action: action, Target: target, Err: err}
	if err != nil {
		s.Reason, s.Message = reason, err.Error()
	}
	return s
}

func (r *Runtime) createSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig) (string, error) {
	if err := os.MkdirAll(cfg.GetLogDirectory(), 0o755); err != nil {
		return "", fmt.Errorf("cri: create pod log directory: %w", err)
	}
	id, err := r.rs.RunPodSandbox(ctx, cfg, r.cfg.RuntimeHandler)
	return id, wrap("RunPodSandbox", sandboxName(cfg), err)
}

// startContainer pulls the image if needed, creates the container and
// starts it. The step's Reason is the waiting reason on failure.
func (r *Runtime) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, status *runtime.PodStatus, sandboxID string, sandboxConfig *runtimeapi.PodSandboxConfig) runtime.SyncStep {
	fail := func(reason string, err error) runtime.SyncStep {
		err = fmt.Errorf("pod %s container %q: %w", podRef(pod), c.Name, err)
		return runtime.SyncStep{Action: runtime.ActionStartContainer, Target: c.Name, Err: err, Reason: reason, Message: err.Error()}
	}
	imageRef, reason, err := r.ensureImage(ctx, pod, c, sandboxConfig)
	if err != nil {
		return fail(reason, err)
	}
	restartCount := 0
	if st := status.FindContainerStatus(c.Name); st != nil {
		restartCount = st.RestartCount + 1
	}
	cfg, err := r.containerConfig(pod, c, restartCount, imageRef)
	if err != nil {
		return fail(ReasonCreateContainerConfigError, err)
	}
	logDir := filepath.Join(sandboxConfig.GetLogDirectory(), c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fail(ReasonCreateContainerError, fmt.Errorf("create log directory: %w", err))
	}
	// A log file left by an earlier container with the same restart count
	// (after the runtime lost its state) is replaced, not appended to.
	if err := os.Remove(filepath.Join(sandboxConfig.GetLogDirectory(), cfg.GetLogPath())); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(ReasonCreateContainerError, fmt.Errorf("remove stale log file: %w", err))
	}
	id, err := r.rs.CreateContainer(ctx, sandboxID, cfg, sandboxConfig)
	if err != nil {
		return fail(ReasonCreateContainerError, wrap("CreateContainer", c.Name, err))
	}
	if err := r.rs.StartContainer(ctx, id); err != nil {
		return fail(ReasonRunContainerError, wrap("StartContainer", id, err))
	}
	r.log.V(2).Info("started container", "pod", podRef(pod), "container", c.Name, "containerID", id, "restartCount", restartCount)
	return runtime.SyncStep{Action: runtime.ActionStartContainer, Target: c.Name}
}

// runningPodFromStatus is the part of an observation that KillPod must
// stop: containers that may be running, and the ready sandboxes (all
// sandboxes when allSandboxes, so a dead sandbox's network is torn down
// before a new one is made).
func runningPodFromStatus(status *runtime.PodStatus, allSandboxes bool) *runtime.Pod {
	p := &runtime.Pod{ID: status.ID, Name: status.Name, Namespace: status.Namespace}
	for _, c := range status.ContainerStatuses {
		if c.State == runtime.ContainerStateRunning || c.State == runtime.ContainerStateUnknown {
			p.Containers = append(p.Containers, &runtime.Container{ID: c.ID, Name: c.Name, State: c.State, Hash: c.Hash, CreatedAt: c.CreatedAt})
		}
	}
	for _, s := range status.SandboxStatuses {
		if allSandboxes || s.State == runtime.SandboxStateReady {
			state := runtime.ContainerStateExited
			if s.State == runtime.SandboxStateReady {
				state = runtime.ContainerStateRunning
			}
			p.Sandboxes = append(p.Sandboxes, &runtime.Container{ID: runtime.ContainerID{ID: s.ID}, Name: s.Name, State: state, CreatedAt: s.CreatedAt})
		}
	}
	return p
}

func parseGrace(a map[string]string) (int64, bool) {
	g, err := strconv.ParseInt(a[AnnotationPodTerminationGracePeriod], 10, 64)
	return g, err == nil
}
