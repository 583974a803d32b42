package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri/images"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// The waiting reasons SyncPod reports, the kubelet's.
const (
	ReasonCreatePodSandboxError      = "CreatePodSandboxError"
	ReasonCreatePodSandboxConfig     = "CreatePodSandboxConfigError"
	ReasonKillPodError               = "KillPodError"
	ReasonKillContainerError         = "KillContainerError"
	ReasonRemoveContainerError       = "RemoveContainerError"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"

	// The image's waiting reasons, from the image manager.
	ReasonErrImagePull      = images.ReasonErrImagePull
	ReasonImagePullBackOff  = images.ReasonImagePullBackOff
	ReasonErrImageNeverPull = images.ReasonErrImageNeverPull
	ReasonInvalidImageName  = images.ReasonInvalidImageName
)

// Event reasons, the kubelet's.
const (
	reasonFailed  = "Failed"
	reasonBackOff = "BackOff"
)

// SyncPod implements runtime.Runtime: it computes the pod's actions with
// ComputePodActions and carries them out: kills, then the sandbox, then
// ephemeral containers, init containers (sidecars to restart and the next
// regular one) and regular containers. A container in crash-loop back-off
// is skipped with reason CrashLoopBackOff; a failure to start one
// container does not stop the others. A round that restarts all
// containers (PodActions.ContainersToReset) only kills and removes them.
func (r *Runtime) SyncPod(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus) *runtime.SyncResult {
	res := &runtime.SyncResult{}
	if status == nil {
		status = &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	a := computePodActions(pod, status, r.cfg.Probes, specHasher{r.hashes, pod.UID}, r.actualFor(pod.UID))
	r.forgetExited(pod.UID, status)
	podResize := r.podCgroupChanged(pod)
	if !a.KillPod && !a.CreateSandbox && !podResize && len(a.ContainersToKill)+len(a.ContainersToReset)+len(a.InitContainersToStart)+len(a.ContainersToStart)+len(a.EphemeralContainersToStart)+len(a.ContainersToResize) == 0 {
		return res // nothing to do: no CRI call, no config built
	}
	log := r.log.WithValues("pod", podRef(pod), "podUID", pod.UID)
	if err := r.ensurePodCgroup(pod); err != nil {
		err = fmt.Errorf("pod %s: %w", podRef(pod), err)
		res.Add(step(runtime.ActionCreateSandbox, podRef(pod), err, ReasonCreatePodSandboxConfig))
		return res
	}

	if a.KillPod {
		if running, empty := status.RunningPod(a.CreateSandbox); !empty {
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
			r.cfg.Events(pod, v1.EventTypeNormal, "Killing", k.Message)
			err := r.killContainer(ctx, pod, k.ID.ID, k.Name, k.GracePeriod, status.IPs, nil)
			res.Add(step(runtime.ActionKillContainer, k.Name, err, ReasonKillContainerError))
			if err != nil {
				return res
			}
		}
		if len(a.ContainersToReset) > 0 {
			r.resetContainers(ctx, pod, a.ContainersToReset, res)
			return res
		}
	}

	sandboxConfig, err := r.sandboxConfig(pod, a.Attempt)
	if err != nil {
		err = fmt.Errorf("pod %s: %w", podRef(pod), err)
		res.Add(step(runtime.ActionCreateSandbox, podRef(pod), err, ReasonCreatePodSandboxConfig))
		return res
	}
	sandboxID, podIPs := a.SandboxID, status.IPs
	if a.CreateSandbox {
		id, err := r.createSandbox(ctx, sandboxConfig)
		res.Add(step(runtime.ActionCreateSandbox, podRef(pod), err, ReasonCreatePodSandboxError))
		if err != nil {
			r.cfg.Events(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", err.Error())
			return res
		}
		log.V(2).Info("created sandbox", "sandboxID", id, "attempt", a.Attempt)
		sandboxID = id
		if st, err := r.rs.PodSandboxStatus(ctx, id, false); err == nil {
			if ss, err := criclient.FromSandboxStatus(st.GetStatus()); err == nil {
				podIPs = ss.IPs
			}
		}
	}

	qos := qosClass(pod) // once per sync, not per container
	if !a.CreateSandbox && (podResize || len(a.ContainersToResize) > 0) {
		// As the kubelet: a failed resize is reported and the sync goes
		// on; the next one tries again.
		if s := r.resize(ctx, pod, a.ContainersToResize, qos); s.Action != "" {
			res.Add(s)
			if s.Err != nil {
				log.Error(s.Err, "resize failed")
			}
		}
	}
	start := func(s containerSpec) runtime.SyncStep {
		s.qos = qos
		return r.startContainer(ctx, pod, s, status, sandboxID, sandboxConfig, podIPs)
	}
	for _, i := range a.EphemeralContainersToStart {
		res.Add(start(specOf(pod, "ephemeral", i)))
	}
	for _, i := range a.InitContainersToStart {
		s := start(specOf(pod, "init", i))
		res.Add(s)
		if s.Err != nil && !IsRestartableInit(&pod.Spec.InitContainers[i]) {
			return res
		}
	}
	for _, i := range a.ContainersToStart {
		res.Add(start(specOf(pod, "regular", i)))
	}
	return res
}

// resetContainers kills and removes the pod's container instances for a
// restart of all its containers, in the given order, and stops at the
// first failure, so the instances that triggered the restart (last) are
// kept for the next round to find. As the kubelet does, a container that
// may still run is stopped without its preStop hook and with the
// shortest grace period, and the logs are kept (the pod's log directory
// goes when the pod does); the restarted container's log goes on with
// the next number (restartCountFromLogs).
func (r *Runtime) resetContainers(ctx context.Context, pod *v1.Pod, reset []ContainerToReset, res *runtime.SyncResult) {
	log := r.log.WithValues("pod", podRef(pod), "podUID", pod.UID)
	for _, c := range reset {
		if c.Kill {
			log.V(2).Info("killing container to restart all containers", "container", c.Name, "containerID", c.ID.String())
			r.cfg.Events(pod, v1.EventTypeNormal, "Killing", "Stopping container "+c.Name+" to restart all containers")
			if err := r.stopContainer(ctx, c.ID.ID, c.Name, minGracePeriod); err != nil {
				res.Add(step(runtime.ActionRemoveContainer, c.Name, err, ReasonKillContainerError))
				return
			}
		}
		log.V(2).Info("removing container to restart all containers", "container", c.Name, "containerID", c.ID.String())
		var err error
		if rerr := r.rs.RemoveContainer(ctx, c.ID.ID); rerr != nil && !criclient.IsNotFound(rerr) {
			err = fmt.Errorf("remove container %q: %w", c.Name, criclient.Wrap("RemoveContainer", c.ID.ID, rerr))
		}
		res.Add(step(runtime.ActionRemoveContainer, c.Name, err, ReasonRemoveContainerError))
		if err != nil {
			return
		}
	}
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
	return id, criclient.Wrap("RunPodSandbox", sandboxName(cfg), err)
}

// crashLoopKey keys the restart back-off by pod, container and whole-spec
// hash, so a changed spec (which restarts the container) starts afresh.
func crashLoopKey(pod *v1.Pod, c *v1.Container) string {
	return string(pod.UID) + "/" + c.Name + "/" + strconv.FormatUint(SpecHash(c), 16)
}

// startContainer applies the restart back-off, pulls the image if needed,
// creates and starts the container and runs its postStart hook. The
// step's Reason is the waiting reason on failure.
func (r *Runtime) startContainer(ctx context.Context, pod *v1.Pod, s containerSpec, status *runtime.PodStatus, sandboxID string, sandboxConfig *runtimeapi.PodSandboxConfig, podIPs []string) runtime.SyncStep {
	c := s.container
	fail := func(reason string, err error) runtime.SyncStep {
		err = fmt.Errorf("pod %s %s %q: %w", podRef(pod), s.kind, c.Name, err)
		return runtime.SyncStep{Action: runtime.ActionStartContainer, Target: c.Name, Err: err, Reason: reason, Message: err.Error()}
	}
	prev := status.FindContainerStatus(c.Name)
	// The back-off is judged, as the kubelet does, from the newest exited
	// instance in the observation this sync started from. An instance
	// killed in this sync for a failed probe was still running then, so
	// its restart is judged from the instance before it: restarts for
	// probe failures are delayed like crashes once they come faster than
	// the delay.
	if dead := newestExited(status, c.Name); dead != nil {
		key := crashLoopKey(pod, c)
		if left := r.crashBackoff.Remaining(key, dead.FinishedAt); left > 0 {
			msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", r.crashBackoff.Delay(key), c.Name, pod.Name, pod.Namespace, pod.UID)
			r.cfg.Events(pod, v1.EventTypeWarning, reasonBackOff, "Back-off restarting failed container "+c.Name+" in pod "+pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")")
			err := &runtime.BackOffError{Err: errors.New(msg), Until: r.cfg.Clock.Now().Add(left)}
			return runtime.SyncStep{Action: runtime.ActionStartContainer, Target: c.Name, Err: err, Reason: ReasonCrashLoopBackOff, Message: msg}
		}
		r.crashBackoff.Next(key, dead.FinishedAt)
	}

	if s.target != "" {
		t := status.FindContainerStatus(s.target)
		if t == nil {
			err := fmt.Errorf("%s.targetContainerName: unable to find target container %q", s.field, s.target)
			r.cfg.Events(pod, v1.EventTypeWarning, reasonFailed, "Error: "+err.Error())
			return fail(ReasonCreateContainerConfigError, err)
		}
		s.targetID = t.ID.ID
	}
	img, reason, err := r.images.EnsureImage(ctx, pod, c, s.field, sandboxConfig)
	if err != nil {
		return fail(reason, err)
	}
	var restartCount int
	if prev != nil {
		restartCount = prev.RestartCount + 1
	} else {
		restartCount = restartCountFromLogs(filepath.Join(sandboxConfig.GetLogDirectory(), c.Name))
	}
	cfg, err := r.containerConfig(ctx, pod, s, restartCount, img, podIPs)
	if err != nil {
		r.cfg.Events(pod, v1.EventTypeWarning, reasonFailed, "Error: "+err.Error())
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
		err = criclient.Wrap("CreateContainer", c.Name, err)
		r.cfg.Events(pod, v1.EventTypeWarning, reasonFailed, "Error: "+err.Error())
		return fail(ReasonCreateContainerError, err)
	}
	r.cfg.Events(pod, v1.EventTypeNormal, "Created", "Created "+s.kind+" "+c.Name)
	if err := r.rs.StartContainer(ctx, id); err != nil {
		err = criclient.Wrap("StartContainer", id, err)
		r.cfg.Events(pod, v1.EventTypeWarning, reasonFailed, "Error: "+err.Error())
		return fail(ReasonRunContainerError, err)
	}
	r.cfg.Events(pod, v1.EventTypeNormal, "Started", "Started "+s.kind+" "+c.Name)
	r.recordContainer(pod.UID, id, valuesOf(pod, c))
	r.log.V(2).Info("started container", "pod", podRef(pod), "container", c.Name, "containerID", id, "restartCount", restartCount)

	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if err := r.runHook(ctx, pod, c, id, c.Lifecycle.PostStart, podIPs); err != nil {
			msg := fmt.Sprintf("PostStartHook failed: %v", err)
			r.cfg.Events(pod, v1.EventTypeWarning, reasonFailedPostStartHook, msg)
			if kerr := r.stopContainer(ctx, id, c.Name, 0); kerr != nil {
				r.log.Error(kerr, "killing a container whose postStart hook failed", "pod", podRef(pod), "container", c.Name)
			}
			return fail(ReasonPostStartHookError, errors.New(msg))
		}
	}
	return runtime.SyncStep{Action: runtime.ActionStartContainer, Target: c.Name}
}

// restartCountFromLogs is the restart count of a container of which the
// runtime has no instance, as the kubelet counts it: one more than the
// highest N among the N.log files (rotated ones included) in its log
// directory, else 0. The runtime forgets instances when they are removed
// (by a restart of all containers) or when it loses its state; the
// count, and the log file's name, go on from the logs left behind.
func restartCountFromLogs(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	count := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		// N.log, or a rotated N.log.<time>[.gz]; N digits only.
		num, rest, ok := strings.Cut(e.Name(), ".log")
		if !ok || num == "" || strings.Trim(num, "0123456789") != "" || (rest != "" && rest[0] != '.') {
			continue
		}
		if n, err := strconv.Atoi(num); err == nil {
			count = max(count, n+1)
		}
	}
	return count
}

// newestExited returns the newest exited instance of the named container,
// or nil.
func newestExited(status *runtime.PodStatus, name string) *runtime.ContainerStatus {
	for _, c := range status.ContainerStatuses {
		if c.Name == name && c.State == runtime.ContainerStateExited {
			return c
		}
	}
	return nil
}

func parseGrace(a map[string]string) (int64, bool) {
	g, err := strconv.ParseInt(a[AnnotationPodTerminationGracePeriod], 10, 64)
	return g, err == nil
}
