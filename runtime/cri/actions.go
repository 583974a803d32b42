package cri

import (
	"math"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// ProbeResult is the latest outcome of a container's probe: an alias of
// runtime.ProbeResult, so probes' results need no conversion.
type ProbeResult = runtime.ProbeResult

// Probe outcomes, runtime's values. ProbeUnknown is what a probe reports
// before it has run.
const (
	ProbeUnknown = runtime.ProbeUnknown
	ProbeSuccess = runtime.ProbeSuccess
	ProbeFailure = runtime.ProbeFailure
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
	// ContainersToResize are running containers whose CPU or memory
	// settings are updated in place, after the kills and before anything
	// starts, together with the pod cgroup's.
	ContainersToResize []ContainerToResize
	// ContainersToReset are the container instances to remove, each
	// killed first when it may still run, when a restart rule with the
	// action RestartAllContainers matched: nothing else is done in that
	// round, and the next one starts the pod's containers afresh. The
	// instances whose exit triggered it come last.
	ContainersToReset []ContainerToReset
}

// ContainerToReset names a container instance SyncPod removes so that
// every container of the pod starts again; Kill: it may still run and is
// stopped first.
type ContainerToReset struct {
	ID   runtime.ContainerID
	Name string
	Kill bool
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
//     changed (runtime.SandboxChanged). A new sandbox kills everything of
//     the pod first and starts afresh: the first init container, or else
//     all containers (under OnFailure, not those that succeeded). A pod
//     with restartPolicy Never whose containers have already run gets no
//     new sandbox: it is done.
//   - Init containers are looked at from the last one backwards, and only
//     in the current sandbox (a container whose SandboxID is empty counts
//     as in it). An init container or sidecar found to have run proves
//     that the ones before it ran, so a missing earlier one is neither
//     waited for nor run again; only sidecars are restarted. The pod is
//     initialized once a regular container exists in the current sandbox,
//     the last init container exited 0, or the last init container is a
//     started sidecar.
//   - A regular init container that exited 0 (and was not OOM-killed)
//     lets the next one start; one that is running is waited for; one
//     that failed or is in the unknown state is run again (killed first
//     when unknown), unless its restart settings say not to, in which case
//     the pod is killed (it has failed); one in the created state is
//     started. A failed one follows the rules of regular containers below
//     (restart rules, its own restartPolicy, the pod's), and so is not run
//     again in a pod marked for deletion; one in the unknown state is run
//     again unless its own restartPolicy (else the pod's) is Never.
//   - A sidecar must be running and past its startup probe, if it has one
//     (a probe that has not answered yet is waited for), for the next init
//     container to start. A sidecar that exited or is in the created or
//     unknown state, fails its startup probe, has its spec changed, or has
//     a liveness probe that failed is (killed and) started again, whatever
//     the pod's restart policy, until the pod is done. A started sidecar
//     still lets what follows it start in the same round, even when it is
//     being restarted for its spec or its liveness probe.
//   - A regular container is (re)started when it has never run, is in the
//     created or unknown state, or has exited and its restart settings say
//     so (podutil.ContainerShouldRestart, the ContainerRestartRules
//     feature): the first of its restartPolicyRules that matches the exit
//     code (action Restart), else its own restartPolicy, else the pod's
//     (Always; OnFailure after a non-zero exit code; Never: not again);
//     never in a pod marked for deletion. In a new sandbox, one that
//     succeeded is not started again when its policy (its own, else the
//     pod's) is OnFailure.
//   - A running regular container whose spec changed is killed and
//     restarted whatever the policy; one whose liveness or startup probe
//     failed is killed and restarted unless its own restartPolicy (else
//     the pod's) is Never, its rules not being looked at; one in the
//     unknown state is killed before it is replaced.
//   - Ephemeral containers start once, when they appear in the spec, and
//     are never restarted.
//   - When no regular container runs and none is to start, the pod is
//     killed: sidecars do not keep a finished pod alive.
//   - Restart all containers (the RestartAllContainersOnContainerExits
//     feature, on by default since Kubernetes 1.37): when the newest
//     instance of an init, sidecar or regular container exited with a
//     code that the first matching rule of its restartPolicyRules gives
//     the action RestartAllContainers, this comes before every rule
//     above, whatever the restart policies: every instance of every init
//     and regular container is removed (ContainersToReset; one that may
//     still run is killed first), the sandbox is kept, and nothing starts
//     in that round. The regular containers come first, then the init
//     containers, then the instances whose exit triggered it, so that a
//     round that fails part way is taken up again by the next. With
//     nothing left, the next round starts the pod as new: the init
//     containers in order, the sidecars, then the regular containers.
//     When the pod needs a new sandbox as well, that round only kills the
//     pod and creates the sandbox, even under restartPolicy Never. A pod
//     marked for deletion is not restarted. Ephemeral containers are left
//     alone.
func ComputePodActions(pod *v1.Pod, status *runtime.PodStatus, probes ProbeResults) PodActions {
	return computePodActions(pod, status, probes, specHasher{}, reportedSettings)
}

// specHasher gives container specs' hashes, through the Runtime's cache
// when it has one. It is passed by value, so it costs no allocation.
type specHasher struct {
	hc  *hashCache // nil: compute every time
	pod types.UID
}

// specHashes are a spec's HashContainer and SpecHash, with SpecHash in
// the hexadecimal form it is recorded in when the cache has it ready.
type specHashes struct {
	kubelet, spec uint64
	specHex       string
}

// hashes returns c's hashes; SpecHash is computed only when full is
// asked for, unless the cache has it already.
func (h specHasher) hashes(c *v1.Container, full bool) specHashes {
	if h.hc != nil {
		return h.hc.hashes(h.pod, c)
	}
	s := specHashes{kubelet: HashContainer(c)}
	if full {
		s.spec = SpecHash(c)
	}
	return s
}

// computePodActions is ComputePodActions with the spec hashes as a
// parameter, so a Runtime can use its cache.
func computePodActions(pod *v1.Pod, status *runtime.PodStatus, probes ProbeResults, hash specHasher, actual actualSettings) PodActions {
	create, attempt, sandboxID := runtime.SandboxChanged(pod, status)
	a := PodActions{
		KillPod:       create,
		CreateSandbox: create,
		SandboxID:     sandboxID,
		Attempt:       attempt,
	}
	if restartAll(pod, status) {
		if !create {
			a.ContainersToReset = containersToReset(pod, status)
		}
		return a
	}
	if create {
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever && attempt != 0 && len(status.ContainerStatuses) != 0 {
			a.CreateSandbox = false
			return a
		}
		var start []int
		for i := range pod.Spec.Containers {
			if runOnce(&pod.Spec.Containers[i], &pod.Spec) && succeeded(pod.Spec.Containers[i].Name, status) {
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

	if !a.initActions(pod, status, probes, hash, actual) || a.KillPod {
		return a
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		st := status.FindContainerStatus(c.Name)
		if st == nil || st.State != runtime.ContainerStateRunning {
			if shouldRestart(pod, c, st) {
				a.ContainersToStart = append(a.ContainersToStart, i)
				if st != nil && st.State == runtime.ContainerStateUnknown {
					a.kill(st, "Container is in \"unknown\" state, try killing it before restart", nil)
				}
			}
			continue
		}
		restart := podutil.RestartsOnProbeFailure(c, &pod.Spec)
		var msg string
		var grace *int64
		switch {
		case specChanged(c, st, hash):
			msg, restart = "Container "+c.Name+" definition changed", true
		case probes != nil && probes.Liveness(st.ID) == ProbeFailure:
			msg, grace = "Container "+c.Name+" failed liveness probe", probeGrace(c.LivenessProbe)
		case probes != nil && probes.Startup(st.ID) == ProbeFailure:
			msg, grace = "Container "+c.Name+" failed startup probe", probeGrace(c.StartupProbe)
		default:
			if a.resizeOrRestart(pod, c, st, i, false, actual) {
				// The kubelet's message says no more.
				a.ContainersToStart = append(a.ContainersToStart, i)
				a.kill(st, resizeMessage(c.Name), nil)
				continue
			}
			keep++
			continue
		}
		if restart {
			msg += ", will be restarted"
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
		a.kill(st, msg, grace)
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
		a.InitContainersToStart = nil // sidecars do not keep a finished pod alive
	}
	return a
}

// restartAll reports whether the newest instance of an init or regular
// container exited with a code that restarts all the pod's containers
// (runtime.RestartAllTriggered), in a pod not marked for deletion. It
// holds until that instance is removed, which the reset does last.
func restartAll(pod *v1.Pod, status *runtime.PodStatus) bool {
	return pod.DeletionTimestamp == nil && runtime.RestartAllTriggered(pod, status)
}

// containersToReset lists every instance of the pod's init and regular
// containers, in the order they are removed: those of regular
// containers, then those of init containers, then the exited instances
// whose exit code restarts all containers (regular, then init), each in
// spec order.
func containersToReset(pod *v1.Pod, status *runtime.PodStatus) []ContainerToReset {
	var targets, initTargets, sources, initSources []ContainerToReset
	collect := func(list []v1.Container, targets, sources *[]ContainerToReset) {
		for i := range list {
			c := &list[i]
			for _, st := range status.ContainerStatuses {
				if st.Name != c.Name {
					continue
				}
				r := ContainerToReset{ID: st.ID, Name: st.Name}
				switch {
				case st.State != runtime.ContainerStateExited:
					r.Kill = true
					*targets = append(*targets, r)
				case podutil.RestartsAllContainers(c, int32(st.ExitCode)):
					*sources = append(*sources, r)
				default:
					*targets = append(*targets, r)
				}
			}
		}
	}
	collect(pod.Spec.InitContainers, &initTargets, &initSources)
	collect(pod.Spec.Containers, &targets, &sources)
	out := make([]ContainerToReset, 0, len(targets)+len(initTargets)+len(sources)+len(initSources))
	out = append(out, targets...)
	out = append(out, initTargets...)
	out = append(out, sources...)
	return append(out, initSources...)
}

// specChanged reports whether a container was created from another spec
// than c. The kubelet's hash (the name and the image) is compared first,
// as the kubelet does; a container that also records nodekit's SpecHash
// (nodekit created it) is then compared on the rest of the spec, so that
// a change the kubelet's hash leaves out restarts it too; CPU and memory
// requests and limits are not part of it (they are resized in place). A
// SpecHash recorded by an earlier nodekit, which covered them, is
// accepted while they are unchanged. A container that records no hash is
// taken as unchanged; one whose recorded kubelet hash does not fit in 32
// bits was created by an earlier nodekit that wrote SpecHash there.
func specChanged(c *v1.Container, st *runtime.ContainerStatus, hash specHasher) bool {
	if st.Hash == 0 {
		return false
	}
	recorded, hasSpec := st.Annotations[AnnotationSpecHash]
	legacy := st.Hash > math.MaxUint32
	h := hash.hashes(c, hasSpec || legacy)
	switch {
	case legacy:
		return st.Hash != h.spec && st.Hash != specHashWithResources(c)
	case st.Hash != h.kubelet:
		return true
	case hasSpec:
		if recorded == h.specHex {
			return false
		}
		v, err := strconv.ParseUint(recorded, 16, 64)
		return err != nil || (v != h.spec && v != specHashWithResources(c))
	}
	return false
}

// probeGrace is the terminationGracePeriodSeconds of the probe whose
// failure kills a container, if it sets one.
func probeGrace(p *v1.Probe) *int64 {
	if p == nil {
		return nil
	}
	return p.TerminationGracePeriodSeconds
}

func (a *PodActions) kill(st *runtime.ContainerStatus, msg string, grace *int64) {
	a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{ID: st.ID, Name: st.Name, Message: msg, GracePeriod: grace})
}

// initActions adds the init-container actions and reports whether the
// pod is initialized, so regular containers may run. It may set KillPod
// (a regular init container failed under restartPolicy Never).
//
// It walks the init containers from the last to the first, as the
// kubelet does: the runtime may have removed init containers that
// completed long ago, so the latest one found tells how far the pod got.
func (a *PodActions) initActions(pod *v1.Pod, status *runtime.PodStatus, probes ProbeResults, hash specHasher, actual actualSettings) bool {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	last := len(inits) - 1
	initialized := regularStartedInSandbox(pod, status, a.SandboxID)
	// reached is set once an init container at or after the current index
	// is known to have run: everything before it has run too.
	reached := initialized
	var start []int // collected backwards
	for i := last; i >= 0; i-- {
		c := &inits[i]
		sidecar := IsRestartableInit(c)
		st := statusInSandbox(status, c.Name, a.SandboxID)
		if st == nil {
			if reached && sidecar {
				start = append(start, i) // a sidecar that should run but is gone
			}
			continue
		}
		if reached && !sidecar {
			continue // past initialization only sidecars are kept running
		}
	state:
		switch st.State {
		case runtime.ContainerStateCreated:
			start = append(start, i) // its start failed; start a new one
		case runtime.ContainerStateRunning:
			if !sidecar {
				// Wait for it to finish; it is resized in place
				// meanwhile (an init container's resize policy is
				// NotRequired).
				a.resizeOrRestart(pod, c, st, i, true, actual)
				break
			}
			if !sidecarStarted(c, st, probes) {
				if probes.Startup(st.ID) == ProbeFailure {
					a.kill(st, "Init container "+c.Name+" failed startup probe", probeGrace(c.StartupProbe))
					start = append(start, i)
				}
				break // not started yet: hold back what follows
			}
			if i == last {
				initialized = true
			} else if !reached {
				start = append(start, i+1)
			}
			switch {
			case specChanged(c, st, hash):
				a.kill(st, "Init container "+c.Name+" definition changed", nil)
				start = append(start, i)
			case c.LivenessProbe != nil && probes != nil && probes.Liveness(st.ID) == ProbeFailure:
				a.kill(st, "Init container "+c.Name+" failed liveness probe", probeGrace(c.LivenessProbe))
				start = append(start, i)
			case a.resizeOrRestart(pod, c, st, i, true, actual):
				a.kill(st, resizeMessage(c.Name), nil)
				start = append(start, i)
			}
		case runtime.ContainerStateExited:
			switch {
			case sidecar:
				start = append(start, i)
			case initFailed(st):
				if pod.DeletionTimestamp != nil || !podutil.ContainerShouldRestart(c, &pod.Spec, int32(st.ExitCode)) {
					a.KillPod = true
					a.InitContainersToStart = nil
					return false
				}
				start = append(start, i)
			case i == last:
				initialized = true
			default:
				start = append(start, i+1)
			}
		default: // unknown
			if !sidecar && !podutil.RestartsOnProbeFailure(c, &pod.Spec) {
				a.KillPod = true
				a.InitContainersToStart = nil
				return false
			}
			a.kill(st, "Init container is in \"unknown\" state, try killing it before restart", nil)
			start = append(start, i)
			break state
		}
		reached = true
	}
	if !reached {
		start = append(start, 0) // nothing has run yet
	}
	if len(start) > 0 {
		slices.Reverse(start)
		a.InitContainersToStart = start
	}
	return initialized
}

// statusInSandbox returns the newest status of the named container in the
// given sandbox; a status without a SandboxID counts as in it.
func statusInSandbox(status *runtime.PodStatus, name, sandboxID string) *runtime.ContainerStatus {
	for _, c := range status.ContainerStatuses {
		if c.Name == name && (c.SandboxID == "" || c.SandboxID == sandboxID) {
			return c
		}
	}
	return nil
}

// regularStartedInSandbox reports whether any regular container has been
// created in the given sandbox, which means initialization is over.
func regularStartedInSandbox(pod *v1.Pod, status *runtime.PodStatus, sandboxID string) bool {
	for i := range pod.Spec.Containers {
		if statusInSandbox(status, pod.Spec.Containers[i].Name, sandboxID) != nil {
			return true
		}
	}
	return false
}

// initFailed reports whether a regular init container that is no longer
// running failed: a non-zero exit code, an OOM kill, or the unknown state.
func initFailed(st *runtime.ContainerStatus) bool {
	return st.Reason == "OOMKilled" || st.State == runtime.ContainerStateUnknown ||
		(st.State == runtime.ContainerStateExited && st.ExitCode != 0)
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

// runOnce reports whether a container that succeeded is not started
// again in a new sandbox: its own restartPolicy is OnFailure, or it sets
// none and the pod's is OnFailure.
func runOnce(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
	}
	return spec.RestartPolicy == v1.RestartPolicyOnFailure
}

// shouldRestart is the kubelet's ShouldContainerBeRestarted: whether a
// regular container that does not run is started (again). One that never
// ran, or is in the created or unknown state, is; one that exited is
// restarted as its restart rules, its restartPolicy or else the pod's
// say (podutil.ContainerShouldRestart). Nothing is in a pod marked for
// deletion.
func shouldRestart(pod *v1.Pod, c *v1.Container, st *runtime.ContainerStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false // a pod marked for deletion is only ever stopped
	}
	if st == nil {
		return true
	}
	switch st.State {
	case runtime.ContainerStateRunning:
		return false
	case runtime.ContainerStateUnknown, runtime.ContainerStateCreated:
		return true
	}
	return podutil.ContainerShouldRestart(c, &pod.Spec, int32(st.ExitCode))
}

// resizeOrRestart checks a running container's CPU and memory settings
// against its spec: a change is resized in place (ContainersToResize),
// unless the container's resize policy for a changed resource restarts
// it, which it reports for the caller to do.
func (a *PodActions) resizeOrRestart(pod *v1.Pod, c *v1.Container, st *runtime.ContainerStatus, index int, init bool, actual actualSettings) bool {
	memory, cpu, restart := resizeNeeded(pod, c, st, actual)
	if restart {
		return true
	}
	if memory || cpu {
		a.ContainersToResize = append(a.ContainersToResize, ContainerToResize{ID: st.ID, Name: c.Name, Init: init, Index: index, Memory: memory, CPU: cpu})
	}
	return false
}
