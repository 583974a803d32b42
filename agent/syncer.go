package agent

import (
	"context"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/probes"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

var (
	_ podworkers.SyncHandler = (*Agent)(nil)
)

// remember records pods as desired.
func (a *Agent) remember(pods []*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range pods {
		a.pods[p.UID] = p
	}
}

// HandlePodAdditions implements syncloop.Handler.
// Pods are admitted first (addPods).
func (a *Agent) HandlePodAdditions(_ context.Context, pods []*v1.Pod) { a.addPods(pods) }

// HandlePodUpdates implements syncloop.Handler. An update's status is
// reconciled as a RECONCILE's is (HandlePodReconcile): a watch may bring
// a spec change and another writer's status change in one.
func (a *Agent) HandlePodUpdates(_ context.Context, pods []*v1.Pod) {
	a.remember(pods)
	a.handleResizes(pods)
	for _, p := range pods {
		a.status.Reconcile(p)
		a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate, Pod: p})
	}
}

// HandlePodRemoves implements syncloop.Handler: the pods are terminated.
func (a *Agent) HandlePodRemoves(_ context.Context, pods []*v1.Pod) {
	a.mu.Lock()
	for _, p := range pods {
		delete(a.pods, p.UID)
		delete(a.told, p.UID)
		_, admitted := a.resizes[p.UID]
		_, restored := a.restored[p.UID]
		if admitted || restored {
			delete(a.resizes, p.UID)
			delete(a.restored, p.UID)
			// Written at the next housekeeping, not once per removal.
			a.allocationsChanged()
		}
	}
	a.mu.Unlock()
	for _, p := range pods {
		a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p})
	}
	a.retryResizes() // the pods' resources are free for resizes that wait
}

// HandlePodReconcile implements syncloop.Handler: a pod whose status
// changed at its source is remembered; its status is written again when
// the source's differs from what the status sink would write
// (status.Manager.Reconcile: another writer changed it); and it is
// synced when its Ready no longer agrees with its readiness gates, as
// the kubelet reconciles Ready: a gate's condition is set by others
// (controllers, through the API server's status), and Ready follows it.
func (a *Agent) HandlePodReconcile(_ context.Context, pods []*v1.Pod) {
	a.remember(pods)
	for _, p := range pods {
		a.status.Reconcile(p)
		if status.NeedToReconcileReadiness(p) && !a.workers.IsPodTerminationRequested(p.UID) {
			a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
		}
	}
}

// HandlePodSyncs implements syncloop.Handler.
func (a *Agent) HandlePodSyncs(_ context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
	}
}

// HandlePodCleanups implements syncloop.Handler, the kubelet's
// housekeeping: it reconciles the workers with the desired pods, kills
// runtime pods no source wants (once every source has been seen), and
// forgets statuses of finished pods. Dead containers are collected on
// their own goroutine (runContainerGC).
func (a *Agent) HandlePodCleanups(ctx context.Context) error {
	quiet := a.housekeep(ctx)
	// The allocations' changes not yet written (removals, re-created
	// pods, a write that failed) are written once per housekeeping.
	saved := a.saveAllocations()
	a.quiet.Store(quiet && saved)
	return nil
}

// housekeepingQuiet is syncloop.Config.Quiet: the last housekeeping left
// nothing to do. Every pod a worker holds syncs and is wanted, the
// runtime runs no pod no source wants, no status waits to be forgotten,
// no resize waits, no volume cleanup failed, and the allocations are
// written.
func (a *Agent) housekeepingQuiet() bool { return a.quiet.Load() }

// housekeep is one housekeeping pass; it reports whether it left nothing
// to do (housekeepingQuiet).
func (a *Agent) housekeep(ctx context.Context) (quiet bool) {
	a.mu.Lock()
	desired := make([]*v1.Pod, 0, len(a.pods))
	want := make(map[types.UID]bool, len(a.pods))
	for uid, p := range a.pods {
		desired = append(desired, p)
		want[uid] = true
	}
	a.mu.Unlock()
	// Which wanted pods' workers had finished before the snapshot below:
	// one that finishes after it (on its own goroutine) was terminated
	// there, not finished, and may be forgotten and restarted (a static
	// pod put back) at the next pass, which must come at 2 s.
	finished := make(map[types.UID]bool)
	for _, p := range desired {
		if a.workers.ShouldPodContentBeRemoved(p.UID) {
			finished[p.UID] = true
		}
	}
	states := a.workers.SyncKnownPods(desired)
	a.tellDeletedAfterFinish(ctx, desired, states)
	resizing := a.retryResizes()
	quiet = !resizing
	for uid, st := range states {
		// A worker still terminating finishes without telling the
		// loop; what follows (forgetting it, telling a deletion) is
		// housekeeping's. A finished pod its source still wants has
		// nothing left.
		if !want[uid] || st == podworkers.Terminating || st == podworkers.Terminated && !finished[uid] {
			quiet = false
		}
	}
	for _, p := range desired {
		if p.DeletionTimestamp != nil {
			quiet = false // told once its worker is done (tellDeletedAfterFinish)
		}
	}
	// A pod created again while its UID terminated (a static pod's
	// manifest removed and put back) has no worker once the old one
	// finished: it starts afresh.
	for _, p := range desired {
		if _, known := states[p.UID]; !known {
			a.log.V(0).Info("starting a pod created again after it terminated", "pod", podutil.FullName(p), "podUID", p.UID)
			quiet = false
			a.allocate(p)
			a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
		}
	}
	// Probes go on for the pods that may still run: wanted, or being
	// terminated (readiness through the grace period, as the kubelet).
	possiblyRunning := maps.Clone(want)
	for uid, st := range states {
		if st != podworkers.Terminated {
			possiblyRunning[uid] = true
		}
	}
	a.probes.CleanupPods(possiblyRunning)
	if !a.merger.SeenAllSources() {
		return false
	}
	// A source's pods are in the merger before this loop has handled
	// their ADD. A pod the merger holds is wanted even while its ADD is
	// queued; otherwise an agent that restarts could kill, as orphans, the
	// very pods it is about to adopt.
	for _, p := range a.merger.Pods() {
		want[p.UID] = true
	}
	// Allocations restored for pods no source has any more.
	a.mu.Lock()
	for uid := range a.restored {
		if !want[uid] {
			delete(a.restored, uid)
			a.allocationsChanged()
		}
	}
	a.mu.Unlock()
	// Orphans: pods the runtime runs (as the PLEG's cache, kept current by
	// relists or the event stream, shows) that no source wants.
	statuses := a.cache.Statuses()
	live := make(map[types.UID]bool, len(statuses))
	for uid, rs := range statuses {
		if !rs.MayRun() {
			continue
		}
		live[uid] = true
		if want[uid] {
			continue
		}
		quiet = false // an orphan, killed now or by its worker
		if _, known := states[uid]; known && !a.workers.ShouldPodContentBeRemoved(uid) {
			continue // its worker is terminating it
		}
		if running, empty := rs.RunningPod(false); !empty {
			a.log.V(2).Info("killing an orphaned pod", "pod", running.FullName(), "podUID", uid)
			a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, RunningPod: running})
		}
	}
	// Volumes and directories of pods no source holds and nothing runs,
	// left by an earlier run or by pods removed since (the kubelet's
	// orphaned pod directories).
	keep := func(uid types.UID) bool {
		if want[uid] || live[uid] {
			return true
		}
		_, known := states[uid]
		return known && !a.workers.ShouldPodContentBeRemoved(uid)
	}
	if err := a.volumes.CleanupOrphans(keep); err != nil {
		a.log.Error(err, "cleaning up orphaned pod volumes failed")
		quiet = false
	}
	for _, uid := range a.status.UIDs() {
		if want[uid] {
			continue
		}
		quiet = false // forgotten now, or once its worker is done
		if a.workers.ShouldPodContentBeRemoved(uid) {
			a.status.RemovePod(uid)
			a.mu.Lock()
			delete(a.reasons, uid)
			delete(a.told, uid)
			delete(a.failed, uid)
			if _, ok := a.resizes[uid]; ok {
				delete(a.resizes, uid)
				a.allocationsChanged()
			}
			a.mu.Unlock()
		}
	}
	return quiet
}

// generate computes and records the status of a pod that runs.
func (a *Agent) generate(pod *v1.Pod, rs *runtime.PodStatus) v1.PodStatus {
	return a.generateAt(pod, rs, status.Syncing)
}

// SyncPod implements podworkers.SyncHandler: status first (from the
// latest observation and the last sync's reasons), then the runtime sync;
// the reasons of this sync update the status at once. A pod past its
// activeDeadlineSeconds is failed first (DeadlineExceeded), so its status
// is terminal and its worker goes on to kill it, as with the kubelet.
func (a *Agent) SyncPod(ctx context.Context, _ podworkers.UpdateType, pod *v1.Pod, rs *runtime.PodStatus) (bool, error) {
	// The pod runs with what it was allocated; a resize its spec asks for
	// and that waits does not reach the runtime.
	pod, seq := a.allocatedPodSeq(pod)
	a.enforceActiveDeadline(pod)
	s := a.generate(pod, rs)
	if s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed {
		return true, nil
	}
	a.syncAtActiveDeadline(pod)
	a.triggerReadiness(pod.UID, &s)
	// As the kubelet: the containers are created once every volume they
	// mount is set up; until then the pod stays Pending, its containers
	// ContainerCreating, and the worker retries with its back-off.
	a.volumes.AddPod(pod)
	if err := a.volumes.WaitForAttachAndMount(ctx, pod); err != nil {
		if ctx.Err() == nil {
			a.cfg.Events(pod, v1.EventTypeWarning, "FailedMount", "Unable to attach or mount volumes: "+err.Error())
		}
		return false, fmt.Errorf("agent: pod %s: unable to attach or mount volumes: %w", podutil.FullName(pod), err)
	}
	res := a.rt.SyncPod(ctx, pod, rs)
	if removedAll(res) {
		// All the pod's containers were removed to restart them (a
		// RestartAllContainers rule matched): sync again as soon as the
		// runtime's view shows them gone, as the kubelet does, rather
		// than at the next resync, since removals make no event worth a
		// sync.
		a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: pod})
	}
	a.probes.AddPod(pod)
	var reasons map[string]status.Reason // nil on a sync without failures
	for _, step := range res.Steps {
		if step.Action == runtime.ActionStartContainer && step.Err != nil {
			if reasons == nil {
				reasons = map[string]status.Reason{}
			}
			reasons[step.Target] = status.Reason{Reason: step.Reason, Message: step.Message}
		}
	}
	a.mu.Lock()
	old := a.reasons[pod.UID]
	a.reasons[pod.UID] = reasons
	a.mu.Unlock()
	freshened := false
	if resizedInPlace(res) {
		// The runtime now reports the new settings, but no container
		// changed state, so no relist looks at the pod again: it is
		// observed now, for this status and the next sync, as the
		// kubelet updates its cache after a resize.
		now := a.cfg.Clock.Now()
		if fresh, err := a.rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err == nil {
			a.cache.Set(pod.UID, fresh, nil, now)
			rs, freshened = fresh, true
		}
	}
	resized := a.resizeSynced(pod, seq, res, rs)
	if resized || freshened || !maps.Equal(old, reasons) {
		a.generate(pod, rs)
	}
	return false, res.Error()
}

// resizedInPlace reports whether a sync resized containers in place.
func resizedInPlace(res *runtime.SyncResult) bool {
	for _, s := range res.Steps {
		if s.Action == runtime.ActionResize && s.Err == nil {
			return true
		}
	}
	return false
}

// removedAll reports whether a sync removed containers to restart all of
// them, without an error.
func removedAll(res *runtime.SyncResult) bool {
	removed := false
	for _, s := range res.Steps {
		if s.Err != nil {
			return false
		}
		if s.Action == runtime.ActionRemoveContainer {
			removed = true
		}
	}
	return removed
}

// triggerReadiness has the readiness probes of the pod's started
// containers that are not ready run at once, as the kubelet's status
// update does on every sync: a container is found ready as soon as it
// has started (or its startup probe succeeded, which syncs the pod), not
// up to a readiness period later.
func (a *Agent) triggerReadiness(uid types.UID, s *v1.PodStatus) {
	for _, list := range [][]v1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses} {
		for i := range list {
			c := &list[i]
			if c.State.Running != nil && c.Started != nil && *c.Started && !c.Ready {
				a.probes.Trigger(uid, c.Name, probes.Readiness)
			}
		}
	}
}

// SyncTerminatingPod implements podworkers.SyncHandler, as the kubelet
// does: the status as the kill begins; the kill within the grace period,
// of what the worker's observation shows (so that no kill has to list
// every pod of the node to find this one); a check that nothing runs any
// more (an error makes the worker try again with a newer observation);
// and the status of the stopped pod, whose phase is now terminal.
func (a *Agent) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus, grace int64) error {
	var running *runtime.Pod
	if rs != nil {
		a.generate(pod, rs)
		running, _ = rs.RunningPod(true)
	}
	// As the kubelet: no liveness restart while the pod stops, but
	// readiness goes on until its containers are gone.
	a.probes.StopLivenessAndStartup(pod.UID)
	if err := a.rt.KillPod(ctx, pod, running, &grace); err != nil {
		return err
	}
	a.probes.RemovePod(pod.UID)
	stopped, err := a.rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return err
	}
	if left, empty := stopped.RunningPod(false); !empty {
		return fmt.Errorf("agent: terminate pod %s: %d containers and %d sandboxes still run after the kill", podutil.FullName(pod), len(left.Containers), len(left.Sandboxes))
	}
	a.generateAt(pod, stopped, status.Stopped)
	a.stopped(pod.UID)
	return nil
}

// SyncTerminatingRuntimePod implements podworkers.SyncHandler: an orphan
// is killed with a one-second grace period, as the kubelet does without a
// spec.
func (a *Agent) SyncTerminatingRuntimePod(ctx context.Context, running *runtime.Pod) error {
	grace := int64(1)
	return a.rt.KillPod(ctx, nil, running, &grace)
}

// SyncTerminatedPod implements podworkers.SyncHandler: the final status,
// where nothing is left running or pending; the teardown of the pod's
// volumes, waited for as the kubelet does; the final status flushed to
// the sink; then Config.PodTerminated. An error of the teardown or of
// PodTerminated makes the worker try again.
func (a *Agent) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus) error {
	a.generateAt(pod, rs, status.Terminated)
	// The terminal phase, held back from the sink while the pod could
	// have running containers, goes now, as the kubelet's TerminatePod
	// sends it, whatever becomes of the volumes' teardown.
	a.status.Resend(pod.UID)
	a.volumes.RemovePod(pod.UID)
	if err := a.volumes.WaitForUnmount(ctx, pod.UID); err != nil {
		return fmt.Errorf("agent: pod %s: %w", podutil.FullName(pod), err)
	}
	if a.cfg.PodTerminated != nil {
		// PodTerminated may delete the pod object once the API server
		// holds the final status, so the status goes first; a sink that
		// fails or is slow holds the pod up for flushTimeout at most,
		// and the status manager tries again on its own.
		fctx, cancel := context.WithTimeout(ctx, flushTimeout)
		err := a.status.Flush(fctx, pod.UID)
		cancel()
		if err != nil {
			a.log.V(2).Info("flushing the final status failed", "pod", podutil.FullName(pod), "podUID", pod.UID, "err", err)
		}
	}
	return a.podTerminated(ctx, pod)
}

// flushTimeout bounds the wait for a pod's final status to reach the
// status sink before Config.PodTerminated.
const flushTimeout = 10 * time.Second

// couldHaveRunningContainers is the status manager's view of the pod
// workers (status.Config.CouldHaveRunningContainers), the kubelet's: a
// pod's containers may run until its worker has stopped it for good. A
// pod rejected at admission never ran one, and the kubelet hands it to no
// worker, so its Failed status goes at once.
func (a *Agent) couldHaveRunningContainers(uid types.UID) bool {
	if f, failed := a.failure(uid); failed && f.rejected {
		return false
	}
	return a.workers.CouldHaveRunningContainers(uid)
}

// podTerminated calls Config.PodTerminated and records a success for a
// pod with a deletionTimestamp, which needs no further call.
func (a *Agent) podTerminated(ctx context.Context, pod *v1.Pod) error {
	if a.cfg.PodTerminated == nil {
		return nil
	}
	if err := a.cfg.PodTerminated(ctx, pod); err != nil {
		return fmt.Errorf("agent: pod %s terminated: %w", podutil.FullName(pod), err)
	}
	if pod.DeletionTimestamp != nil {
		a.mu.Lock()
		a.told[pod.UID] = true
		a.mu.Unlock()
	}
	return nil
}

// tellDeletedAfterFinish calls Config.PodTerminated for the desired pods
// a source began to delete after their worker had finished (a pod that
// reached Succeeded or Failed before its deletion arrived), whose worker
// ignores the deletion. A failure is logged and tried again at the next
// housekeeping.
func (a *Agent) tellDeletedAfterFinish(ctx context.Context, desired []*v1.Pod, states map[types.UID]podworkers.State) {
	if a.cfg.PodTerminated == nil {
		return
	}
	for _, p := range desired {
		if p.DeletionTimestamp == nil {
			continue
		}
		if _, known := states[p.UID]; !known || !a.workers.ShouldPodContentBeRemoved(p.UID) {
			continue
		}
		a.mu.Lock()
		told := a.told[p.UID]
		a.mu.Unlock()
		if told {
			continue
		}
		if err := a.podTerminated(ctx, p); err != nil {
			a.log.V(2).Info("telling a deleted pod terminated failed", "pod", podutil.FullName(p), "podUID", p.UID, "err", err)
		}
	}
}

// HandleProbeUpdate implements syncloop.Handler: readiness and startup
// verdicts go into the pod's status at once.
func (a *Agent) HandleProbeUpdate(_ context.Context, u probes.Update) {
	switch u.Type {
	case probes.Readiness:
		a.status.SetContainerReadiness(u.PodUID, u.ContainerID, u.Result == probes.Success)
	case probes.Startup:
		a.status.SetContainerStartup(u.PodUID, u.ContainerID, u.Result == probes.Success)
	}
}

// generateAt computes and records the pod's status at a stage of its
// termination. The previous status is read without a copy (PeekPodStatus),
// and the result may share memory with it: read the result, never modify
// it.
func (a *Agent) generateAt(pod *v1.Pod, rs *runtime.PodStatus, stage status.Stage) v1.PodStatus {
	prev, ok := a.status.PeekPodStatus(pod.UID)
	f, failed := a.failure(pod.UID)
	if ok && failed && f.rejected {
		// A rejected pod never ran: its status stays the one reject
		// recorded, with no container status nor condition, as the
		// kubelet hands such a pod to no pod worker.
		return prev
	}
	var ids []string
	if rs != nil {
		for _, c := range rs.ContainerStatuses {
			ids = append(ids, c.ID.String())
		}
	}
	ready, started := a.status.VerdictsFor(ids)
	a.mu.Lock()
	waiting := a.reasons[pod.UID]
	a.mu.Unlock()
	pending, inProgress, accepted := a.resizeConditions(pod.UID)
	in := status.Input{Pod: a.allocatedPod(pod), Runtime: rs, Waiting: waiting, Ready: ready, Started: started, NodeIPs: a.cfg.NodeIPs, Now: a.cfg.Clock.Now(), Stage: stage,
		ResizePending: pending, ResizeInProgress: inProgress, ResizeAcceptedGeneration: accepted}
	if r, ok := a.rt.(runtime.PodCgroupReader); ok {
		in.PodCgroup, _ = r.PodCgroupResources(pod.UID)
	}
	if ok {
		in.Previous = &prev
	}
	s := status.Generate(in)
	if failed {
		s.Phase, s.Reason, s.Message = v1.PodFailed, f.Reason.Reason, f.Message
		if f.disruption != "" {
			disruptionTarget(&s, in.Previous, f.disruption, in.Now)
		}
	}
	if !ok || prev.Phase != v1.PodRunning {
		if s.Phase == v1.PodRunning && s.StartTime != nil {
			a.metrics.startDuration.Observe(a.cfg.Clock.Since(s.StartTime.Time).Seconds())
		}
	}
	a.status.SetPodStatus(pod, s)
	return s
}
