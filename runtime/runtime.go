package runtime

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EventFunc receives the events a part of the agent records about a pod,
// as the kubelet's event recorder would: typ is v1.EventTypeNormal or
// v1.EventTypeWarning, reason a short CamelCase word (Pulled, Unhealthy,
// FailedValidation...), message a sentence. pod is nil when the event
// concerns no valid pod (a manifest file or URL that holds none). It must
// not block and may be called from several goroutines at once. This is the
// one definition: probes.EventFunc, podsource.EventFunc and cri.EventFunc
// are aliases of it, so one function serves them all.
type EventFunc func(pod *v1.Pod, typ, reason, message string)

// Runtime is a pod-level container runtime: it makes the running state of a
// pod match the pod's spec, kills pods, and reports what it observes.
//
// All methods are safe for concurrent use for different pods. Callers
// serialize calls for the same pod (nodekit's podworkers do). All methods
// block until the runtime has answered or ctx ends.
type Runtime interface {
	// SyncPod moves the pod towards its spec: it creates the sandbox if
	// there is no ready one, pulls images, and creates and starts the
	// containers the spec and restart policy call for. status is the most
	// recent observation of the pod (from GetPodStatus); SyncPod does not
	// mutate it. The returned result lists every action taken and its
	// error; Error() on the result joins them. SyncPod does only one round
	// of actions; the caller calls again after the next observation.
	SyncPod(ctx context.Context, pod *v1.Pod, status *PodStatus) *SyncResult

	// KillPod stops every container of the pod and then its sandboxes.
	// pod may be nil when only the runtime's record (runningPod) is known,
	// as for orphaned pods. gracePeriodOverride, when not nil, replaces the
	// grace period that the pod spec gives (in seconds). KillPod returns
	// once everything has stopped or ctx ends; stopping something that is
	// already gone is not an error.
	KillPod(ctx context.Context, pod *v1.Pod, runningPod *Pod, gracePeriodOverride *int64) error

	// GetPodStatus observes one pod in detail. A pod the runtime does not
	// know yields a PodStatus with no sandboxes and no containers, not an
	// error. Errors wrap the sentinel errors of this package.
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*PodStatus, error)

	// GetPods lists the pods that the runtime has. With all false only
	// pods with a running container or a ready sandbox are listed.
	GetPods(ctx context.Context, all bool) ([]*Pod, error)

	// Status reports the runtime's own health conditions.
	Status(ctx context.Context) (*Status, error)
}

// PodVisitor is implemented by a Runtime that can list its pods into
// memory it reuses from one list to the next (runtime/cri), which saves a
// caller that lists often, as the generic PLEG relists every second, the
// allocation of GetPods's result and the garbage collections it brings.
// VisitPods lists what GetPods(ctx, all) lists and calls fn with each pod,
// in the order of their IDs. The *Pod and its containers are the
// runtime's until fn returns: fn must copy what it keeps beyond the call
// (Pod.Clone; strings may be kept, they are not reused) and must not
// change them.
// When VisitPods returns an error, fn has not been called.
type PodVisitor interface {
	VisitPods(ctx context.Context, all bool, fn func(*Pod)) error
}

// PodCgroupReader is implemented by a Runtime that manages pod cgroups
// (runtime/cri with Config.CgroupRoot). PodCgroupResources returns the
// CPU and memory settings it last gave the pod's cgroup, in the API's
// units (a nil field is no limit), as the kubelet reports a running pod's
// status.resources from its cgroup; ok is false when it knows of none.
type PodCgroupReader interface {
	PodCgroupResources(uid types.UID) (res *ContainerResources, ok bool)
}

// ResizeChecker is implemented by a Runtime that resizes running
// containers in place (runtime/cri). ResizeInProgress reports whether
// the observation shows a running container (or the pod's cgroup) with
// other requests or limits than the pod's spec gives it, as the kubelet
// decides when a resize is over.
type ResizeChecker interface {
	ResizeInProgress(pod *v1.Pod, status *PodStatus) bool
}

// SyncAction names what a SyncPod step did.
type SyncAction string

// The actions SyncPod reports.
const (
	ActionCreateSandbox  SyncAction = "CreatePodSandbox"
	ActionKillPod        SyncAction = "KillPod"
	ActionStartContainer SyncAction = "StartContainer"
	ActionKillContainer  SyncAction = "KillContainer"
	// ActionRemoveContainer: a container was (killed and) removed so that
	// it starts afresh, as when a restart rule with the action
	// RestartAllContainers matched. The caller syncs the pod again at
	// once, so that the containers start without waiting for a resync.
	ActionRemoveContainer SyncAction = "RemoveContainer"
	// ActionResize: running containers' CPU and memory settings (and
	// their pod cgroup's) were changed in place to those of the spec. A
	// failure's Message is what the pod's PodResizeInProgress condition
	// shows.
	ActionResize SyncAction = "ResizePodInPlace"
)

// SyncStep is one action of a SyncPod call and its outcome.
type SyncStep struct {
	Action SyncAction
	// Target is the container name, or the pod's namespace/name for pod
	// level actions.
	Target string
	// Err is nil on success. Reason is a short CamelCase reason the status
	// code shows as the container's waiting reason (ErrImagePull,
	// CreateContainerError, ...); Message is its human-readable text.
	Err     error
	Reason  string
	Message string
}

// SyncResult lists the steps one SyncPod call took.
type SyncResult struct {
	Steps []SyncStep
}

// Add appends a step.
func (r *SyncResult) Add(s SyncStep) { r.Steps = append(r.Steps, s) }

// Error joins the errors of all failed steps, or returns nil.
func (r *SyncResult) Error() error {
	var errs []error
	for _, s := range r.Steps {
		if s.Err != nil {
			errs = append(errs, s.Err)
		}
	}
	return errors.Join(errs...)
}

// GCPolicy bounds how many dead containers a runtime keeps.
type GCPolicy struct {
	// MinAge: dead containers younger than this are never removed.
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of each container of
	// each pod are kept (the kubelet's default is 1); negative: no limit.
	MaxPerPodContainer int
	// MaxContainers bounds the dead containers on the node; negative: no
	// limit (the kubelet's default).
	MaxContainers int
}

// GarbageCollector is an optional capability of a Runtime, found with a
// type assertion: removing dead containers and sandboxes. Runtimes
// without it keep everything.
type GarbageCollector interface {
	// GarbageCollect removes dead containers beyond policy, oldest first,
	// and the sandboxes that are no longer needed. podGone reports whether
	// a pod is no longer wanted at all; all of its dead containers,
	// sandboxes and logs go. It is safe to call concurrently with pod
	// syncs; it never removes a running container or a ready sandbox.
	GarbageCollect(ctx context.Context, policy GCPolicy, podGone func(types.UID) bool) error
}
