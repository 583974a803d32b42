package fakecri

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

type container struct {
	id         string
	sandboxID  string
	config     *runtimeapi.ContainerConfig
	image      *image
	state      runtimeapi.ContainerState
	createdAt  int64
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string
	message    string
	behavior   Behavior
	logPath    string // absolute, "" when the sandbox has no log directory
	resources  *runtimeapi.ContainerResources
	user       *runtimeapi.ContainerUser // the process's, from the config
	timer      clock.Timer
	// exited is closed when the container leaves the running state.
	exited chan struct{}
	// snap is the status events carry, built when snapOf changes.
	snap   *runtimeapi.ContainerStatus
	snapOf snapKey
}

// snapKey is every mutable field status reads.
type snapKey struct {
	state                    runtimeapi.ContainerState
	startedAt, finishedAt    int64
	exitCode                 int32
	reason, message, logPath string
	image                    *image
	resources                *runtimeapi.ContainerResources
}

// eventStatus returns the container's status for events: one shared
// value, rebuilt only when the container changed, so that an event of a
// pod with n containers costs n pointers rather than n new statuses.
// Receivers must not mutate it.
func (c *container) eventStatus() *runtimeapi.ContainerStatus {
	k := snapKey{c.state, c.startedAt, c.finishedAt, c.exitCode, c.reason, c.message, c.logPath, c.image, c.resources}
	if c.snap == nil || k != c.snapOf {
		c.snap, c.snapOf = c.status(), k
	}
	return c.snap
}

// containerName is the name containerd reserves for a container:
// <container>_<pod>_<namespace>_<uid>_<attempt>.
func containerName(sb *sandbox, m *runtimeapi.ContainerMetadata) string {
	sm := sb.config.GetMetadata()
	return fmt.Sprintf("%s_%s_%s_%s_%d", m.GetName(), sm.GetName(), sm.GetNamespace(), sm.GetUid(), m.GetAttempt())
}

func (c *container) status() *runtimeapi.ContainerStatus {
	st := &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    c.config.GetMetadata(),
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       &runtimeapi.ImageSpec{Image: c.image.name(), UserSpecifiedImage: c.config.GetImage().GetImage()},
		ImageRef:    c.image.id,
		ImageId:     c.image.id,
		Reason:      c.reason,
		Message:     c.message,
		Labels:      maps.Clone(c.config.GetLabels()),
		Annotations: maps.Clone(c.config.GetAnnotations()),
		Mounts:      c.config.GetMounts(),
		LogPath:     c.logPath,
		Resources:   c.resources,
		User:        c.user,
	}
	if c.state == runtimeapi.ContainerState_CONTAINER_EXITED && st.Reason == "" {
		st.Reason = "Completed"
		if c.exitCode != 0 {
			st.Reason = "Error"
		}
	}
	return st
}

// processUser is the identity a runtime reports for a container's
// process: the config's runAsUser and runAsGroup (root when unset:
// fakecri's images name no user and have no /etc/passwd or /etc/group),
// and as supplemental groups the primary group followed by the config's,
// each once, as containerd reports them.
func processUser(sc *runtimeapi.LinuxContainerSecurityContext) *runtimeapi.ContainerUser {
	u := &runtimeapi.LinuxContainerUser{Uid: sc.GetRunAsUser().GetValue(), Gid: sc.GetRunAsGroup().GetValue()}
	u.SupplementalGroups = append(u.SupplementalGroups, u.Gid)
	for _, g := range sc.GetSupplementalGroups() {
		if !slices.Contains(u.SupplementalGroups, g) {
			u.SupplementalGroups = append(u.SupplementalGroups, g)
		}
	}
	return &runtimeapi.ContainerUser{Linux: u}
}

// Script makes containers created from now on whose names match m behave
// as b. The env-var script of the container is replaced, not merged. When
// several scripts match, the last one added wins.
func (r *Runtime) Script(m Match, b Behavior) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scripts = append(r.scripts, script{match: m, behavior: b})
}

// Match selects containers by pod namespace, pod name and container name;
// an empty field matches anything.
type Match struct {
	Namespace, Pod, Container string
}

type script struct {
	match    Match
	behavior Behavior
}

func (m Match) matches(sb *runtimeapi.PodSandboxMetadata, c *runtimeapi.ContainerMetadata) bool {
	return (m.Namespace == "" || m.Namespace == sb.GetNamespace()) &&
		(m.Pod == "" || m.Pod == sb.GetName()) &&
		(m.Container == "" || m.Container == c.GetName())
}

// CreateContainer implements RuntimeService. The image must be present
// (pulled); FAKECRI_* variables in the config's Envs script the container.
func (r *Runtime) CreateContainer(_ context.Context, sandboxID string, config *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("CreateContainer"); err != nil {
		return "", err
	}
	sb, _, err := lookup(r.sandboxes, sandboxID, "sandbox")
	if err != nil {
		return "", err
	}
	m := config.GetMetadata()
	if m == nil {
		return "", errorf(codes.Unknown, "container config must include metadata")
	}
	if config.GetImage().GetImage() == "" {
		return "", errorf(codes.Unknown, "failed to resolve image \"\": ambiguous digest string")
	}
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", errorf(codes.NotFound, "failed to get sandbox container task: no running task found: task %s not found: not found", sb.id)
	}
	img := r.resolveImageLocked(config.GetImage().GetImage())
	if img == nil {
		return "", errorf(codes.NotFound, "failed to get image %q: not found", config.GetImage().GetImage())
	}
	name := containerName(sb, m)
	if owner, taken := r.names[name]; taken {
		return "", errorf(codes.Unknown, "failed to reserve container name %q: name %q is reserved for %q", name, name, owner)
	}
	b, err := BehaviorFromEnv(config.GetEnvs())
	if err != nil {
		return "", errorf(codes.InvalidArgument, "container %q: %v", m.GetName(), err)
	}
	for _, s := range r.scripts {
		if s.match.matches(sb.config.GetMetadata(), m) {
			b = s.behavior
		}
	}
	c := &container{
		id:        newID(),
		sandboxID: sb.id,
		config:    config,
		image:     img,
		state:     runtimeapi.ContainerState_CONTAINER_CREATED,
		createdAt: r.createStamp(),
		behavior:  b,
		resources: &runtimeapi.ContainerResources{Linux: config.GetLinux().GetResources()},
		user:      processUser(config.GetLinux().GetSecurityContext()),
		exited:    make(chan struct{}),
	}
	if dir := sb.config.GetLogDirectory(); dir != "" && config.GetLogPath() != "" {
		c.logPath = filepath.Join(dir, config.GetLogPath())
	}
	r.containers[c.id] = c
	sb.containers[c.id] = c
	sb.addSorted(c)
	r.names[name] = c.id
	r.emit(c.id, sb, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return c.id, nil
}

// StartContainer implements RuntimeService.
func (r *Runtime) StartContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("StartContainer"); err != nil {
		return err
	}
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		return err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return errorf(codes.Unknown, "failed to set starting state for container %q: container is in %s state", c.id, c.state)
	}
	sb := r.sandboxes[c.sandboxID]
	if sb == nil || sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return errorf(codes.NotFound, "sandbox container %q is not running: not found", c.sandboxID)
	}
	now := r.now()
	if now.UnixNano() < c.createdAt {
		now = time.Unix(0, c.createdAt)
	}
	if c.behavior.StartError != "" {
		c.state = runtimeapi.ContainerState_CONTAINER_EXITED
		c.finishedAt = now.UnixNano()
		c.exitCode = exitCodeStartError
		c.reason = reasonStartError
		c.message = c.behavior.StartError
		close(c.exited)
		r.emit(c.id, sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
		return errorf(codes.Unknown, "failed to start container %q: %s", c.id, c.behavior.StartError)
	}
	if err := writeLog(c.logPath, now, "stdout", c.behavior.Log); err != nil {
		return errorf(codes.Internal, "failed to create container log for %q: %v", c.id, err)
	}
	c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.startedAt = now.UnixNano()
	r.emit(c.id, sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	if b := c.behavior; b.Exit {
		if b.ExitAfter <= 0 {
			r.exitLocked(c, b.ExitCode, b.ExitReason)
		} else {
			exitAt := now.Add(b.ExitAfter)
			exit := func() {
				defer r.mu.Unlock()
				r.firing = exitAt
				defer func() { r.firing = time.Time{} }()
				c.timer = nil // it has fired; stopping it would take the clock's lock
				r.exitLocked(c, b.ExitCode, b.ExitReason)
			}
			c.timer = r.clock.AfterFunc(b.ExitAfter, func() {
				// A fake clock runs this holding its own lock, and a call
				// holding r.mu may be waiting for that lock (to read the
				// time, or to set a timer): waiting for r.mu here would
				// deadlock. The container then exits as soon as r.mu is
				// free, at its exit time all the same.
				if r.mu.TryLock() {
					exit()
					return
				}
				r.pending.Add(1)
				go func() {
					defer r.pending.Done()
					r.mu.Lock()
					exit()
				}()
			})
		}
	}
	return nil
}

// exitLocked moves a running container to exited.
func (r *Runtime) exitLocked(c *container, code int32, reason string) {
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return
	}
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.finishedAt = r.now().UnixNano()
	if c.finishedAt <= c.startedAt {
		c.finishedAt = c.startedAt + 1
	}
	c.exitCode = code
	c.reason = reason
	if msg := c.behavior.TerminationMessage; msg != "" {
		if err := writeTerminationMessage(c.config, msg); err != nil {
			c.message = fmt.Sprintf("failed to write termination message: %v", err)
		}
	}
	close(c.exited)
	r.emit(c.id, r.sandboxes[c.sandboxID], runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

// StopContainer implements RuntimeService. A container that handles
// SIGTERM exits after its stop delay (code 143 by default); one that
// ignores SIGTERM, or whose delay is longer than timeout seconds, is killed
// when the timeout ends (137). A timeout of 0 kills at once. Stopping a
// container that is not running succeeds.
func (r *Runtime) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.mu.Lock()
	if err := r.enter("StopContainer"); err != nil {
		r.mu.Unlock()
		return err
	}
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		r.mu.Unlock()
		return err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return nil
	}
	grace := time.Duration(timeout) * time.Second
	b := c.behavior
	if timeout <= 0 || (!b.IgnoreSIGTERM && b.StopDelay == 0) {
		code := int32(exitCodeSIGKILL)
		if timeout > 0 {
			code = b.termExitCode()
		}
		r.exitLocked(c, code, "")
		r.mu.Unlock()
		return nil
	}
	exited := c.exited
	r.mu.Unlock()

	var termDone <-chan time.Time
	if !b.IgnoreSIGTERM && b.StopDelay < grace {
		t := r.clock.NewTimer(b.StopDelay)
		defer t.Stop()
		termDone = t.C()
	}
	kill := r.clock.NewTimer(grace)
	defer kill.Stop()
	select {
	case <-exited:
		return nil
	case <-termDone:
		r.exit(c, b.termExitCode())
		return nil
	case <-kill.C():
		r.exit(c, exitCodeSIGKILL)
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

func (r *Runtime) exit(c *container, code int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exitLocked(c, code, "")
}

// RemoveContainer implements RuntimeService. A running container is
// killed first. Removing a container that does not exist succeeds.
func (r *Runtime) RemoveContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("RemoveContainer"); err != nil {
		return err
	}
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return err
	}
	r.removeContainerLocked(c)
	return nil
}

func (r *Runtime) removeContainerLocked(c *container) {
	r.exitLocked(c, exitCodeSIGKILL, "")
	delete(r.containers, c.id)
	if sb := r.sandboxes[c.sandboxID]; sb != nil {
		delete(sb.containers, c.id)
		sb.removeSorted(c)
		delete(r.names, containerName(sb, c.config.GetMetadata()))
	}
	r.emit(c.id, r.sandboxes[c.sandboxID], runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
}

// ListContainers implements RuntimeService. Filters match by ID (or a
// unique prefix), state, sandbox ID (or prefix) and labels.
func (r *Runtime) ListContainers(_ context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ListContainers"); err != nil {
		return nil, err
	}
	var out []*runtimeapi.Container
	for _, id := range slices.Sorted(maps.Keys(r.containers)) {
		c := r.containers[id]
		if f != nil {
			if f.GetId() != "" && !hasPrefix(c.id, f.GetId()) {
				continue
			}
			if f.GetPodSandboxId() != "" && !hasPrefix(c.sandboxID, f.GetPodSandboxId()) {
				continue
			}
			if f.GetState() != nil && f.GetState().GetState() != c.state {
				continue
			}
			if !matchLabels(f.GetLabelSelector(), c.config.GetLabels()) {
				continue
			}
		}
		out = append(out, &runtimeapi.Container{
			Id:           c.id,
			PodSandboxId: c.sandboxID,
			Metadata:     c.config.GetMetadata(),
			Image:        &runtimeapi.ImageSpec{Image: c.image.name(), UserSpecifiedImage: c.config.GetImage().GetImage()},
			ImageRef:     c.image.id,
			ImageId:      c.image.id,
			State:        c.state,
			CreatedAt:    c.createdAt,
			Labels:       maps.Clone(c.config.GetLabels()),
			Annotations:  maps.Clone(c.config.GetAnnotations()),
		})
	}
	return out, nil
}

// ContainerStatus implements RuntimeService.
func (r *Runtime) ContainerStatus(_ context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ContainerStatus"); err != nil {
		return nil, err
	}
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: c.status()}
	if verbose {
		info, _ := json.Marshal(map[string]any{"sandboxID": c.sandboxID, "config": c.config, "behavior": c.behavior})
		resp.Info = map[string]string{"info": string(info)}
	}
	return resp, nil
}

// UpdateContainerResources implements RuntimeService; the resources are
// recorded and reported in the container's status.
func (r *Runtime) UpdateContainerResources(_ context.Context, id string, res *runtimeapi.ContainerResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("UpdateContainerResources"); err != nil {
		return err
	}
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		return err
	}
	c.resources = res
	return nil
}

// ReopenContainerLog implements RuntimeService. fakecri keeps no log file
// open: it checks that the container is running and creates its log file
// again when it is gone (renamed by a log rotation), as a runtime does
// when it reopens the log. Later lines are appended to the new file.
func (r *Runtime) ReopenContainerLog(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ReopenContainerLog"); err != nil {
		return err
	}
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		return err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return errorf(codes.Unknown, "container is not running")
	}
	if err := writeLog(c.logPath, r.clock.Now(), "stdout", ""); err != nil {
		return errorf(codes.Internal, "reopening container log: %v", err)
	}
	return nil
}

// CheckpointContainer implements RuntimeService: Unimplemented.
func (r *Runtime) CheckpointContainer(context.Context, *runtimeapi.CheckpointContainerRequest) error {
	return errorf(codes.Unimplemented, "fakecri does not checkpoint containers")
}

// Exit makes a running container exit now with the given code and reason
// (empty for the runtime's own "Completed"/"Error"), as if its process
// ended.
func (r *Runtime) Exit(id string, code int32, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		return err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return errorf(codes.FailedPrecondition, "container %q is in %s state", c.id, c.state)
	}
	r.exitLocked(c, code, reason)
	return nil
}

// SetExecResult scripts the result of one exec command line (arguments
// joined by spaces) in an existing container.
func (r *Runtime) SetExecResult(id, cmd string, res ExecResult) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		return err
	}
	m := make(map[string]ExecResult, len(c.behavior.Exec)+1)
	for k, v := range c.behavior.Exec {
		m[k] = v
	}
	m[cmd] = res
	c.behavior.Exec = m
	return nil
}

// SetUsage sets the memory and CPU figures an existing container reports
// in stats.
func (r *Runtime) SetUsage(id string, memoryBytes, cpuNanoCores uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		return err
	}
	c.behavior.MemoryBytes, c.behavior.CPUNanoCores = memoryBytes, cpuNanoCores
	return nil
}
