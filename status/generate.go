package status

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// Reason is why a container is waiting, as the last sync reported it
// (ErrImagePull, CrashLoopBackOff, CreateContainerConfigError...).
type Reason struct {
	Reason  string
	Message string
}

// Input is everything a pod status is computed from.
type Input struct {
	// Pod is the spec. Required.
	Pod *v1.Pod
	// Runtime is the runtime's latest observation; nil means nothing runs.
	Runtime *runtime.PodStatus
	// Previous is the status computed last time, if any: it keeps
	// transition times, the start time, and a terminal phase.
	Previous *v1.PodStatus
	// Waiting holds the last sync's failure per container name.
	Waiting map[string]Reason
	// Ready and Started are the probes' verdicts per container ID
	// ("type://id"); a container without an entry is ready when it runs
	// and has no readiness probe, started when it runs and has no startup
	// probe.
	Ready   map[string]bool
	Started map[string]bool
	// NodeIPs fill HostIP(s), and PodIP(s) on the host network.
	NodeIPs []string
	// Now stamps new transitions.
	Now time.Time
	// Stage is where the pod is in its termination; the zero value,
	// Syncing, is a pod that runs.
	Stage Stage
	// ResizePending, when set, is why a requested in-place resize of the
	// pod waits: the PodResizePending condition, with reason Deferred or
	// Infeasible (v1.PodReasonDeferred, v1.PodReasonInfeasible).
	ResizePending *Reason
	// PodCgroup, when set, is what the pod's cgroup has
	// (runtime.PodCgroupReader): a pod the API shows Running reports it
	// in status.resources, as the kubelet reads its pod cgroup.
	PodCgroup *runtime.ContainerResources
	// ResizeInProgress, when set, is a resize that was accepted and is not
	// carried out yet: the PodResizeInProgress condition, with reason
	// Error (v1.PodReasonError) and a message once carrying it out failed.
	ResizeInProgress *Reason
	// ResizeAcceptedGeneration is the pod's generation when the resize
	// in progress was accepted: the PodResizeInProgress condition's
	// observedGeneration, which the kubelet keeps while the condition
	// lasts. Zero: the pod's generation, as on every other condition.
	ResizeAcceptedGeneration int64
}

// Stage is where a pod is in its termination, as its pod worker sees it.
type Stage int

// The stages, in order.
const (
	// Syncing: the pod runs, or is being terminated but its containers
	// have not been stopped yet; containers may still restart.
	Syncing Stage = iota
	// Stopped: the pod is being terminated (deleted, its source removed
	// it, evicted, or finished) and its containers have been stopped for
	// good, the kubelet's podIsTerminal. Once nothing runs the phase is
	// Succeeded when every regular container exited 0 and Failed
	// otherwise, whatever the restart policy; except for a static pod,
	// whose phase still follows its restart policy, as with the kubelet.
	Stopped
	// Terminated: the pod's final status, the kubelet's TerminatePod on
	// top of Stopped. Every container that has not terminated is
	// reported terminated with ContainerStatusUnknown and exit code 137
	// (regular containers only once the pod has initialized; init
	// containers up to the last that tried to start), and a pod other
	// than a static one that is still Pending or Running is Failed.
	Terminated
)

// Generate computes a pod's API status from its spec and what the
// runtime observed, with the kubelet's rules (pkg/kubelet/kubelet_pods.go
// and pkg/kubelet/status): container statuses with state, last state,
// restart count, ready and started; the phase, with its reason and
// message kept while it lasts; the PodReadyToStartContainers,
// Initialized, Ready, ContainersReady and PodScheduled conditions, and
// AllContainersRestarting for a pod with a RestartAllContainers rule, with
// their reasons and messages, after the conditions of the pod's own
// status that the kubelet does not own (kept as they are); the in-place
// resize conditions in gives (PodResizeInProgress observing
// in.ResizeAcceptedGeneration); IPs, start time and QoS class; the
// resources of the pod and of its containers. in.Stage
// gives the phase and container states of a pod being terminated. A
// terminal phase in Previous (or in the pod's own status) never changes.
// It is a pure function: it reads in and never modifies it.
func Generate(in Input) v1.PodStatus {
	pod := in.Pod
	rs := in.Runtime
	if rs == nil {
		rs = &runtime.PodStatus{}
	}
	prev := in.Previous
	if prev == nil {
		// As the kubelet does: without a status of its own, the one the
		// pod came with is the previous one.
		prev = &pod.Status
	}
	s := v1.PodStatus{QOSClass: podutil.QOSClass(pod)}

	hasInits := len(pod.Spec.InitContainers) > 0
	// The kubelet's ShouldAllContainersRestart: a restart of all
	// containers was under way, or an exit that starts one is seen now.
	// Only a pod with a RestartAllContainers rule can have one.
	mayRestartAll := podutil.MayRestartAllContainers(&pod.Spec)
	restartingAll := mayRestartAll && (podutil.RestartingAllContainers(pod, prev) || runtime.RestartAllTriggered(pod, rs))
	s.InitContainerStatuses = containerStatuses(in, pod.Spec.InitContainers, rs, hasInits, true, restartingAll, prev.InitContainerStatuses)
	s.ContainerStatuses = containerStatuses(in, pod.Spec.Containers, rs, hasInits, false, restartingAll, prev.ContainerStatuses)
	var eph []v1.Container
	for i := range pod.Spec.EphemeralContainers {
		eph = append(eph, v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	s.EphemeralContainerStatuses = containerStatuses(in, eph, rs, hasInits, false, restartingAll, prev.EphemeralContainerStatuses)
	for i := range s.EphemeralContainerStatuses {
		// Ephemeral containers have no probes and no part in the pod's
		// readiness: the kubelet reports them never ready, with no
		// started flag.
		s.EphemeralContainerStatuses[i].Ready = false
		s.EphemeralContainerStatuses[i].Started = nil
	}

	podIsTerminal := in.Stage >= Stopped && !podutil.IsStatic(pod)
	s.Phase = phase(pod, s.InitContainerStatuses, s.ContainerStatuses, activeRegularStarted(pod, rs), podIsTerminal)
	// A terminal phase, the API's or this agent's, never changes.
	switch {
	case podutil.IsTerminal(pod.Status.Phase):
		s.Phase = pod.Status.Phase
	case podutil.IsTerminal(prev.Phase):
		s.Phase = prev.Phase
	}
	// The pod's reason and message belong to its phase: kept while it
	// lasts (from the API's status when the previous one has none),
	// dropped when it changes.
	if s.Phase == prev.Phase {
		s.Reason, s.Message = prev.Reason, prev.Message
		if s.Reason == "" {
			s.Reason = pod.Status.Reason
		}
		if s.Message == "" {
			s.Message = pod.Status.Message
		}
	}

	if len(in.NodeIPs) > 0 {
		s.HostIP = in.NodeIPs[0]
		for _, ip := range in.NodeIPs {
			s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
		}
	}
	ips := rs.IPs
	if pod.Spec.HostNetwork {
		ips = in.NodeIPs
	}
	if len(ips) > 0 {
		s.PodIP = ips[0]
		for _, ip := range ips {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
		}
	} else {
		// The sandbox is gone (a finished pod): keep the last known IPs,
		// as the kubelet does.
		s.PodIP, s.PodIPs = prev.PodIP, prev.PodIPs
	}
	s.StartTime = prev.StartTime
	if s.StartTime == nil {
		t := metav1.NewTime(in.Now)
		s.StartTime = &t
	}

	s.Conditions = conditions(pod, rs, &s, prev, mayRestartAll, restartingAll, metav1.NewTime(in.Now))
	if !podutil.IsTerminal(s.Phase) {
		s.Conditions = resizeConditions(s.Conditions, in, prev, metav1.NewTime(in.Now))
	}
	s.Resources, s.AllocatedResources = podResources(pod, in.PodCgroup, prev)
	if in.Stage == Terminated {
		finish(pod, &s, prev)
	}
	// The generation of the spec this status was made from, on the status
	// and on each condition it made, as the kubelet records it (its
	// PodObservedGenerationTracking, on for good since 1.35). A static
	// pod's generation is 0: nothing is recorded.
	s.ObservedGeneration = pod.Generation
	for i := range s.Conditions {
		s.Conditions[i].ObservedGeneration = pod.Generation
		if s.Conditions[i].Type == v1.PodResizeInProgress && in.ResizeAcceptedGeneration != 0 && pod.Generation != 0 {
			s.Conditions[i].ObservedGeneration = in.ResizeAcceptedGeneration
		}
	}
	s.Conditions = append(othersConditions(pod), s.Conditions...)
	return s
}

// othersConditions are the conditions of the pod's own status (the API
// server's) that the kubelet does not own (a readiness gate's, a
// DisruptionTarget another component set), which a generated status
// keeps as they are, first, as the kubelet's does.
func othersConditions(pod *v1.Pod) []v1.PodCondition {
	var out []v1.PodCondition
	for _, c := range pod.Status.Conditions {
		if !OwnedByKubelet(c.Type) {
			out = append(out, *c.DeepCopy())
		}
	}
	return out
}

// OwnedByKubelet reports whether the kubelet owns pod conditions of type
// t, and so replaces them in the API with its own: PodScheduled,
// PodReadyToStartContainers, Initialized, ContainersReady, Ready, the
// in-place resize conditions and AllContainersRestarting. Others (a
// readiness gate's, DisruptionTarget) belong to other components.
func OwnedByKubelet(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady,
		v1.PodResizePending, v1.PodResizeInProgress, v1.AllContainersRestarting:
		return true
	}
	return false
}

// finish turns a pod's status into its final one, as the kubelet's
// TerminatePod does: what has not terminated is reported terminated
// with an unknown end, and a pod other than a static one ends Failed
// unless it already ended.
func finish(pod *v1.Pod, s *v1.PodStatus, prev *v1.PodStatus) {
	unknown := func() v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reasonStatusUnknown, Message: msgNotLocated, ExitCode: exitUnknown}}
	}
	if everInitialized(pod, prev) {
		for i := range s.ContainerStatuses {
			if s.ContainerStatuses[i].State.Terminated == nil {
				s.ContainerStatuses[i].State = unknown()
			}
		}
	}
	// Init containers up to the last one that tried to start; when none
	// did, the first.
	last := 0
	for i := len(s.InitContainerStatuses) - 1; i >= 0; i-- {
		st := &s.InitContainerStatuses[i]
		if st.State.Waiting == nil || st.LastTerminationState.Terminated != nil {
			last = i
			break
		}
	}
	for i := 0; i < len(s.InitContainerStatuses) && i <= last; i++ {
		if s.InitContainerStatuses[i].State.Terminated == nil {
			s.InitContainerStatuses[i].State = unknown()
		}
	}
	if !podutil.IsStatic(pod) && !podutil.IsTerminal(s.Phase) {
		s.Phase = v1.PodFailed
	}
}

// everInitialized is the kubelet's hasPodInitialized, read from the
// previous status: the pod has no init containers, a regular container
// has left the waiting state once, or the last init container completed
// (a sidecar: runs and has started).
func everInitialized(pod *v1.Pod, prev *v1.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, st := range prev.ContainerStatuses {
		if st.LastTerminationState.Terminated != nil || st.State.Waiting == nil {
			return true
		}
	}
	n := len(prev.InitContainerStatuses)
	if n == 0 || n > len(pod.Spec.InitContainers) {
		return false
	}
	c, st := &pod.Spec.InitContainers[n-1], prev.InitContainerStatuses[n-1]
	if c.Name != st.Name {
		return false
	}
	if isSidecar(c) {
		return st.State.Running != nil && st.Started != nil && *st.Started
	}
	done := func(t *v1.ContainerStateTerminated) bool { return t != nil && t.ExitCode == 0 }
	return done(st.LastTerminationState.Terminated) || done(st.State.Terminated)
}

// The reasons the kubelet gives a pod's ContainersReady and Ready (and
// Initialized, PodCompleted) once the pod has ended; kube.StatusSink
// uses them too.
const (
	ReasonPodCompleted = "PodCompleted"
	ReasonPodFailed    = "PodFailed"
)

// The reasons of the kubelet's pod conditions.
const (
	reasonUnknownStatuses    = "UnknownContainerStatuses"
	reasonNotReady           = "ContainersNotReady"
	reasonNotInitialized     = "ContainersNotInitialized"
	reasonGatesNotReady      = "ReadinessGatesNotReady"
	reasonSandboxNotReady    = "PodSandboxNotReady"
	reasonRestartAllStarted  = "RestartAllContainersStarted"
	msgUnknownStatusesFormat = "containers with unknown status: "
)

// conditions are the kubelet's pod conditions, in its order:
// PodReadyToStartContainers, Initialized, Ready, ContainersReady,
// PodScheduled, and AllContainersRestarting for a pod with a restart rule
// whose action is RestartAllContainers (mayRestartAll). A condition keeps
// its previous transition time while its status does not change.
func conditions(pod *v1.Pod, rs *runtime.PodStatus, s, prev *v1.PodStatus, mayRestartAll, restartingAll bool, now metav1.Time) []v1.PodCondition {
	containersReady := containersReadyCondition(pod, s)
	conds := []v1.PodCondition{
		readyToStartCondition(pod, rs),
		initializedCondition(pod, s, prev),
		readyCondition(pod, containersReady),
		containersReady,
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	}
	if mayRestartAll {
		conds = append(conds, allRestartingCondition(pod, rs, s, restartingAll))
	}
	for i := range conds {
		conds[i].LastTransitionTime = now
		for _, p := range prev.Conditions {
			if p.Type == conds[i].Type && p.Status == conds[i].Status {
				conds[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	return conds
}

// allRestartingCondition is the kubelet's AllContainersRestarting: True,
// with reason RestartAllContainersStarted, from the exit that restarts all
// containers until the runtime has none of the pod's init and regular
// containers left (the sync removes them all, then starts them afresh);
// False otherwise, with PodCompleted or PodFailed once the pod has ended.
func allRestartingCondition(pod *v1.Pod, rs *runtime.PodStatus, s *v1.PodStatus, restartingAll bool) v1.PodCondition {
	c := v1.PodCondition{Type: v1.AllContainersRestarting, Status: v1.ConditionFalse}
	switch {
	case s.Phase == v1.PodSucceeded:
		c.Reason = ReasonPodCompleted
	case s.Phase == v1.PodFailed:
		c.Reason = ReasonPodFailed
	case restartingAll && !noContainerLeft(pod, rs):
		c.Status, c.Reason, c.Message = v1.ConditionTrue, reasonRestartAllStarted, "a container exited with a code that restarts all containers"
	}
	return c
}

// noContainerLeft reports whether the runtime has no instance of any of
// the pod's init and regular containers.
func noContainerLeft(pod *v1.Pod, rs *runtime.PodStatus) bool {
	for _, list := range [2][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if rs.FindContainerStatus(list[i].Name) != nil {
				return false
			}
		}
	}
	return true
}

// listMessage joins the kubelet's message parts: for each non-empty list
// of container names, its prefix and the names as "[a b]"; parts are
// separated by ", ". It allocates once.
func listMessage(prefix1 string, list1 []string, prefix2 string, list2 []string) string {
	var b strings.Builder
	part := func(prefix string, list []string) {
		if len(list) == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(prefix)
		b.WriteByte('[')
		for i, n := range list {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(n)
		}
		b.WriteByte(']')
	}
	n := len(prefix1) + len(prefix2) + 6
	for _, l := range [][]string{list1, list2} {
		for _, name := range l {
			n += len(name) + 1
		}
	}
	b.Grow(n)
	part(prefix1, list1)
	part(prefix2, list2)
	return b.String()
}

// readyToStartCondition is True when the pod needs no new sandbox, by
// the very rule the sync decides it with (runtime.SandboxChanged), so the
// condition and the sync never disagree.
func readyToStartCondition(pod *v1.Pod, rs *runtime.PodStatus) v1.PodCondition {
	if changed, _, _ := runtime.SandboxChanged(pod, rs); !changed {
		return v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
	}
	return v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse, Reason: reasonSandboxNotReady, Message: sandboxMessage(pod, rs)}
}

// sandboxMessage says, in the kubelet's words, why the pod needs a new
// sandbox: the first of runtime.SandboxChanged's rules that holds.
func sandboxMessage(pod *v1.Pod, rs *runtime.PodStatus) string {
	if len(rs.SandboxStatuses) == 0 {
		return "no pod sandbox exists"
	}
	ready := 0
	for _, sb := range rs.SandboxStatuses {
		if sb.State == runtime.SandboxStateReady {
			ready++
		}
	}
	newest := rs.SandboxStatuses[0]
	switch {
	case ready > 1:
		return "multiple pod sandboxes are ready and need to be reconciled"
	case newest.State != runtime.SandboxStateReady:
		return "pod sandbox is not ready"
	case (newest.NetworkMode == runtime.NamespaceModeNode) != pod.Spec.HostNetwork:
		return "network namespace mode changed and sandbox needs to be recreated"
	case !pod.Spec.HostNetwork && len(newest.IPs) == 0:
		return "pod sandbox has no IP address"
	}
	return ""
}

// containersReadyCondition is the kubelet's ContainersReady: every
// sidecar and regular container is ready; PodCompleted or PodFailed once the pod has
// ended.
func containersReadyCondition(pod *v1.Pod, s *v1.PodStatus) v1.PodCondition {
	c := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse}
	if len(s.ContainerStatuses) == 0 && len(s.InitContainerStatuses) == 0 {
		c.Reason = reasonUnknownStatuses
		return c
	}
	var buf1, buf2 [4]string // no allocation for short lists
	unknown, unready := buf1[:0], buf2[:0]
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
			switch st := findStatus(s.InitContainerStatuses, c.Name); {
			case st == nil:
				unknown = append(unknown, c.Name)
			case !st.Ready:
				unready = append(unready, c.Name)
			}
		}
	}
	for i := range pod.Spec.Containers {
		name := pod.Spec.Containers[i].Name
		switch st := findStatus(s.ContainerStatuses, name); {
		case st == nil:
			unknown = append(unknown, name)
		case !st.Ready:
			unready = append(unready, name)
		}
	}
	switch {
	case s.Phase == v1.PodSucceeded && len(unknown) == 0:
		c.Reason = ReasonPodCompleted
		return c
	case s.Phase == v1.PodFailed:
		c.Reason = ReasonPodFailed
		return c
	}
	if len(unknown)+len(unready) > 0 {
		c.Reason, c.Message = reasonNotReady, listMessage(msgUnknownStatusesFormat, unknown, "containers with unready status: ", unready)
		return c
	}
	c.Status = v1.ConditionTrue
	return c
}

// NeedToReconcileReadiness reports whether the pod's Ready condition, in
// the status its source sent, disagrees with its readiness gates'
// conditions in that same status, as the kubelet's
// NeedToReconcilePodReadiness: a pod with readiness gates whose Ready is
// present with another status or message than its ContainersReady and
// gates make it. The caller syncs such a pod; a status change that moved
// no gate (the node's own status write coming back) needs no sync.
func NeedToReconcileReadiness(pod *v1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	var ready, containersReady *v1.PodCondition
	for i := range pod.Status.Conditions {
		switch c := &pod.Status.Conditions[i]; c.Type {
		case v1.PodReady:
			ready = c
		case v1.ContainersReady:
			containersReady = c
		}
	}
	if ready == nil {
		return false
	}
	cr := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse}
	if containersReady != nil {
		cr = *containersReady
	}
	want := readyCondition(pod, cr)
	return ready.Status != want.Status || ready.Message != want.Message
}

// readyCondition is the kubelet's Ready: ContainersReady, and then every
// readiness gate's condition True in the pod's status (set by others,
// such as controllers).
func readyCondition(pod *v1.Pod, containersReady v1.PodCondition) v1.PodCondition {
	if containersReady.Status != v1.ConditionTrue {
		return v1.PodCondition{Type: v1.PodReady, Status: containersReady.Status, Reason: containersReady.Reason, Message: containersReady.Message}
	}
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == g.ConditionType {
				found = &pod.Status.Conditions[i]
				break
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case found.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), found.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: reasonGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}

// initializedCondition is the kubelet's Initialized: every regular init
// container completed and every sidecar started, or a regular container
// has started, or the condition was True before; PodCompleted once the
// pod has succeeded.
func initializedCondition(pod *v1.Pod, s, prev *v1.PodStatus) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse}
	var buf1, buf2 [4]string // no allocation for short lists
	unknown, incomplete := buf1[:0], buf2[:0]
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		st := findStatus(s.InitContainerStatuses, ic.Name)
		switch {
		case st == nil:
			unknown = append(unknown, ic.Name)
		case !initContainerDone(ic, st):
			incomplete = append(incomplete, ic.Name)
		}
	}
	if s.Phase == v1.PodSucceeded && len(unknown) == 0 {
		c.Status, c.Reason = v1.ConditionTrue, ReasonPodCompleted
		return c
	}
	if regularStarted(s.ContainerStatuses) {
		// Initialized once: a sidecar restarting later does not undo it.
		c.Status = v1.ConditionTrue
		return c
	}
	if len(unknown)+len(incomplete) > 0 {
		for _, p := range prev.Conditions {
			if p.Type == v1.PodInitialized && p.Status == v1.ConditionTrue {
				// Nor does a pod that initializes again (in a new
				// sandbox) lose the condition.
				c.Status = v1.ConditionTrue
				return c
			}
		}
		c.Reason, c.Message = reasonNotInitialized, listMessage(msgUnknownStatusesFormat, unknown, "containers with incomplete status: ", incomplete)
		return c
	}
	c.Status = v1.ConditionTrue
	return c
}

// regularStarted: a regular container runs or has run.
func regularStarted(statuses []v1.ContainerStatus) bool {
	for i := range statuses {
		if statuses[i].State.Running != nil || statuses[i].State.Terminated != nil {
			return true
		}
	}
	return false
}

// initContainerDone: a sidecar has started, a regular init container
// completed with exit code 0.
func initContainerDone(c *v1.Container, st *v1.ContainerStatus) bool {
	if isSidecar(c) {
		return st.Started != nil && *st.Started
	}
	return st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
}

func isSidecar(c *v1.Container) bool { return podutil.IsRestartableInit(c) }

func findStatus(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// phase is the kubelet's getPhase. Sidecars count with the regular
// containers: a running one is running (so a pod whose regular containers
// finished stays Running until its sidecars stop), a stopped or
// crash-looping one counts for nothing, and one that runs but has not
// passed its startup probe keeps the pod Pending only until the pod has
// initialized (initialized: a regular container exists in the current
// sandbox).
//
// Whether a stopped container will run again is decided per container,
// as the kubelet does with the ContainerRestartRules feature (on by
// default since Kubernetes 1.35): by its restart rules, its own
// restartPolicy, else the pod's (podutil.ContainerShouldRestart), on its
// last exit code; a container removed to restart all containers (its
// last state's reason RestartingAllContainers) runs again. A regular init
// container that failed and will not run again fails the pod. Once no container runs, the pod is Running while
// one of them is to restart, else Succeeded when all exited 0 and Failed
// otherwise. Without per-container settings this is the pod-level rule:
// Always keeps the pod Running, OnFailure until all succeeded, Never
// ends it.
//
// terminal is the kubelet's podIsTerminal (never set for static pods):
// the containers will not run again, so once nothing runs the pod has
// Succeeded or Failed whatever its restart policy.
func phase(pod *v1.Pod, inits, containers []v1.ContainerStatus, initialized, terminal bool) v1.PodPhase {
	var pendingInit, pendingSidecars, failedInitForGood int
	var unknown, running, waiting, stopped, stoppedForGood, succeeded int
	restarts := func(c *v1.Container, code int32) bool { return podutil.ContainerShouldRestart(c, &pod.Spec, code) }
	// A container removed to restart all containers is to start again.
	restartsAfter := func(c *v1.Container, t *v1.ContainerStateTerminated) bool {
		return t.Reason == reasonRestartingAll || restarts(c, t.ExitCode)
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		st := findStatus(inits, c.Name)
		if isSidecar(c) {
			switch {
			case st == nil:
				unknown++
			case st.State.Running != nil:
				running++
				if st.Started == nil || !*st.Started {
					pendingSidecars++
				}
			case st.State.Terminated != nil:
				// A stopped sidecar does not count.
			case st.State.Waiting != nil:
				if st.LastTerminationState.Terminated == nil {
					pendingSidecars++
					waiting++
				}
			default:
				pendingSidecars++
				unknown++
			}
			continue
		}
		switch {
		case st == nil:
			pendingInit++
		case st.State.Running != nil:
			pendingInit++
		case st.State.Terminated != nil:
			if t := st.State.Terminated; t.ExitCode != 0 && !restartsAfter(c, t) {
				failedInitForGood++
			}
		case st.State.Waiting != nil:
			if t := st.LastTerminationState.Terminated; t == nil {
				pendingInit++
			} else if t.ExitCode != 0 && !restartsAfter(c, t) {
				failedInitForGood++
			}
		default:
			pendingInit++
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		st := findStatus(containers, c.Name)
		switch {
		case st == nil:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if !restartsAfter(c, st.State.Terminated) {
				stoppedForGood++
			}
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if t := st.LastTerminationState.Terminated; t != nil {
				stopped++
				if !restartsAfter(c, t) {
					stoppedForGood++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInitForGood > 0 {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0, pendingSidecars > 0 && !initialized, waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if terminal {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if stopped != stoppedForGood {
			return v1.PodRunning // at least one is to restart
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	}
	return v1.PodPending
}

// activeRegularStarted is the kubelet's sign that a pod has initialized:
// a regular container exists in the pod's current, ready sandbox. A
// container whose sandbox the runtime did not name counts as in it.
func activeRegularStarted(pod *v1.Pod, rs *runtime.PodStatus) bool {
	sb := rs.ReadySandbox()
	if sb == nil {
		return false
	}
	for _, cs := range rs.ContainerStatuses {
		if cs.SandboxID != "" && cs.SandboxID != sb.ID {
			continue
		}
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == cs.Name {
				return true
			}
		}
	}
	return false
}

// resizeConditions adds the PodResizePending and PodResizeInProgress
// conditions in gives, as the kubelet does: True, with a transition time
// kept while the reason stays, and probed when the reason or message
// last changed (the kubelet probes it at each decision; a status made on
// every sync would otherwise change each time). A pod that has ended has
// neither.
func resizeConditions(conds []v1.PodCondition, in Input, prev *v1.PodStatus, now metav1.Time) []v1.PodCondition {
	add := func(t v1.PodConditionType, r *Reason) {
		if r == nil {
			return
		}
		c := v1.PodCondition{Type: t, Status: v1.ConditionTrue, Reason: r.Reason, Message: r.Message, LastProbeTime: now, LastTransitionTime: now}
		for _, p := range prev.Conditions {
			if p.Type == t && p.Reason == r.Reason && !p.LastTransitionTime.IsZero() {
				c.LastTransitionTime = p.LastTransitionTime
				if p.Message == r.Message && !p.LastProbeTime.IsZero() {
					c.LastProbeTime = p.LastProbeTime
				}
			}
		}
		conds = append(conds, c)
	}
	add(v1.PodResizePending, in.ResizePending)
	add(v1.PodResizeInProgress, in.ResizeInProgress)
	return conds
}
