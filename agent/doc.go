// Package agent composes nodekit's parts into a working node agent:
//
//	podsource.Merger ──▶ syncloop ◀── pleg (relist) ◀── runtime
//	                        │
//	                        ▼
//	                   podworkers ──▶ Agent.SyncPod: status.Generate → status.Manager
//	                                                 → volumes.WaitForAttachAndMount
//	                                                 → runtime.SyncPod
//
// New builds every part from Config, whose zero fields are documented
// defaults: runtime/cri over the given CRI services (or any
// runtime.Runtime), the generic PLEG (1 s relist), pod workers (1 min
// resync, 10 s back-off), a volume manager, a status manager pushing to
// Config.StatusSink, housekeeping every 2 s (every 20 s while the last
// pass left nothing to do and nothing has happened since), a sync loop
// that wakes for resyncs only when a pod is due (on a 1 s grid, as the
// kubelet's sync ticker), and a private Prometheus registry. Run starts
// them in dependency order under one errgroup: the first fatal error stops
// the rest, and Run returns once every goroutine has.
//
// /healthz (Agent.Healthy) fails with "the runtime has not answered
// Status yet" until the runtime's first answer, as the kubelet's node is
// not ready before its first runtime check
// (TestHealthzFailsUntilTheRuntimeAnswers). Started before its runtime
// answers, Run waits for it: it asks for the runtime's Status with
// back-off on the clock (100ms doubling to 5s, the kubelet's back-off
// while its runtime is down), logs "waiting for the runtime" with the
// error each time, serves /healthz meanwhile (failing with that error),
// and starts syncing once the runtime answers, or returns nil if ctx ends
// first. It then asks for Status every 5s, the kubelet's period: a
// Status call that has waited Config.RuntimeStatusTimeout (5s) makes
// /healthz fail at once with "the runtime did not answer Status within
// 5s" and how long the call has been waiting, rather than after the CRI
// call's own 2-minute timeout, so a runtime that hangs just after a check
// fails /healthz within 10s
// (TestHungRuntimeFailsHealthzWithinPeriodAndTimeout,
// TestHealthzSaysHowLongTheStatusCallHasWaited). The call is cancelled
// at its timeout; a runtime that ignores the cancellation keeps its one
// call, which the next checks wait on instead of starting more, and holds
// up neither Run nor its end (TestStatusThatIgnoresCancellationHoldsOneCall);
// a cut-off call's answer is the cancellation's, so the runtime is asked
// again once it returns (TestCheckAfterATimeoutAsksAgain).
// A panic in Status is the check's error (TestStatusPanicIsTheChecksError).
//
// What the agent does with each pod, as the kubelet does:
//   - each sync first computes the pod's status from the runtime's newest
//     observation, then calls Runtime.SyncPod; failures of this sync
//     become the containers' waiting reasons (ErrImagePull,
//     CrashLoopBackOff...) at once;
//   - a sync that removed the pod's containers to restart them all (a
//     restart rule with the action RestartAllContainers matched an exit;
//     runtime.ActionRemoveContainer steps) is followed by another as soon
//     as the runtime's view shows them gone, which starts them again;
//   - a pod that reaches Succeeded or Failed is terminated (its sandbox
//     stopped); a pod removed from its source is killed within its grace
//     period; a changed static manifest is a new pod, started once the
//     old one has terminated; a manifest removed and put back unchanged
//     (the same UID) starts its pod afresh once the old one terminated;
//   - a status change at the source (RECONCILE) syncs the pod when its
//     Ready disagrees with its readiness gates' conditions
//     (status.NeedToReconcileReadiness), so Ready follows a gate within a
//     sync, not at the next resync;
//   - housekeeping reconciles the workers with the desired pods, kills
//     runtime pods no source wants (only once every source has been
//     seen, and never a pod a source holds whose ADD is still queued) and
//     forgets finished pods' statuses. A pass that leaves nothing to do
//     (every worker's pod wanted and syncing or finished, no orphan, no
//     status to forget, no resize waiting, no deletion pending) makes the
//     node quiet: the next pass is Config.QuietHousekeepingPeriod (20 s)
//     away, until a source update, PLEG event or probe result brings
//     the 2 s period back (package syncloop, TestQuietHousekeeping,
//     TestHousekeepingQuiet). The kubelet keeps 2 s always; a change is
//     cleaned up as soon, and an idle node wakes a tenth as often for
//     housekeeping. A node where something is always pending (a pod held
//     by a finalizer, say) simply stays at 2 s;
//   - volumes (Config.Volumes, by default a volumes.Manager over the
//     CRI pods directory): each sync adds the pod and waits until every
//     volume its containers mount is set up before the runtime creates
//     anything; until then the pod stays Pending with its containers
//     ContainerCreating, each failed wait is a Warning FailedMount
//     "Unable to attach or mount volumes: ..." event, and the pod is
//     retried with the worker's back-off while other pods go on. The
//     runtime finds the volumes through it (cri.Config.Volumes). Once the
//     pod's containers are gone, its volumes are torn down and waited
//     for before Config.PodTerminated; and once every source has been
//     seen, each housekeeping removes the volumes and directories of
//     pods no source holds and nothing runs (left by an earlier run);
//   - Config.StatusSink never gets a terminal phase while the pod's
//     containers or sandbox may still run (a Never pod whose containers
//     exited, a pod failed at its deadline or evicted before its kill):
//     it gets the phase it last had (before its first status, the pod's
//     own) until the worker has stopped the pod, then the whole status,
//     sent as the worker turns to the stopped pod's volumes, as the
//     kubelet's status manager holds the phase back from the API server
//     (status.Config.CouldHaveRunningContainers, from
//     podworkers.CouldHaveRunningContainers;
//     TestSinkGetsNoTerminalPhaseWhileThePodRuns). A pod rejected at
//     admission, which never ran, is the exception;
//   - once a pod's worker has finished it (its containers and sandboxes
//     gone, its volumes torn down, its final status flushed to the status
//     sink, waiting 10 s at most for a slow one),
//     Config.PodTerminated is called with the newest spec, again after an
//     error, and once only after it succeeded (a pod that had finished
//     before a source began to delete it gets one more call, at the next
//     housekeeping): kube.PodDeleter uses it to delete the pod object of
//     a graceful deletion, as the kubelet does;
//   - dead containers are collected (runtime.GarbageCollector) every
//     Config.ContainerGCPeriod on a goroutine of their own, as the
//     kubelet does: a slow or hung collection never delays a pod's sync,
//     and a collection never overlaps the previous one;
//   - a new agent adopts what is already running: pods carry stable UIDs
//     and the runtime keeps the kubelet's labels, so nothing is created
//     twice or restarted;
//   - in-place resize, as the kubelet's allocation manager: a pod runs
//     with the requests and limits it was admitted with (its allocation).
//     An update whose containers' or spec.resources' requests or limits
//     differ is a resize request: it is accepted if the pod, so resized,
//     fits Config.Allocatable beside the other pods' allocations
//     (condition PodResizeInProgress, event ResizeStarted), and waits
//     otherwise (PodResizePending, reason Deferred, with the kubelet's
//     "Node didn't have enough resource: ..." message and a
//     ResizeDeferred event), tried again at each housekeeping and when a
//     pod goes; a spec back to its allocation ends the wait. The runtime
//     carries an accepted resize out in the next sync (runtime/cri: in
//     place, or by a restart under a RestartContainer resize policy); the
//     pod is then observed again at once, and PodResizeInProgress ends
//     with a ResizeCompleted event, or gets reason Error with the
//     runtime's message and a ResizeError event, tried again at each
//     sync. A resize that would change the pod's QoS class is
//     Infeasible (the API refuses it; another source may send it).
//     With Config.AllocationCheckpoint the allocations are kept in that
//     file (examples/node: <root-dir>/nodekit_allocation_state), as the
//     kubelet checkpoints them: written atomically, with a checksum, once
//     per batch of admitted pods and when a resize is accepted, before
//     its sync; removals and a write that failed (logged) are written at
//     the next housekeeping. An agent that restarts admits its pods with
//     what they were given, and a resize their specs ask for meanwhile
//     is decided on as any other (a pod whose deferred resize does not
//     fit keeps running, still Deferred); entries of pods no source has
//     any more go once every source has been seen. A corrupt file stops
//     Run with an error naming it. Without it the
//     allocations are in memory: a restarted agent admits its pods with
//     their specs as they are, so a deferred resize is admitted (or
//     refused, and the pod stopped) with the pod. An accepted resize
//     that a restart interrupts is carried out by the next sync without
//     PodResizeInProgress or its events: what the runtime applied is not
//     kept (the kubelet keeps it in actuated_pods_state).
//
// Handler is the node server of package server over the agent: /healthz
// (runtime ready and PLEG current), /pods (a v1.PodList with statuses, as
// the kubelet's /pods), /metrics, /runningpods/, /configz, /containerLogs,
// /stats/summary, /metrics/resource and /metrics/cadvisor
// (server.CRIStats over Config.RuntimeService), and /exec, /attach and /portForward through the
// CRI's streaming server; with Config.Listen set, Run serves them itself,
// over TLS and behind authentication when Config.Server says so. The
// read-only paths answer GET and HEAD only (other methods get 405 with an
// Allow header); a request body over Config.HTTP.MaxBodyBytes is refused
// (413). The server on
// Config.Listen is bounded by Config.HTTP: read-header, read, write and
// idle timeouts (10s, 30s, 1m, 90s) and a header limit (64 KiB, 431
// beyond). When Run cannot listen it returns the error, which names the
// address ("listen tcp 127.0.0.1:10255: bind: address already in use"),
// and Addr returns "" instead of waiting.
//
// Probes: the agent runs a probes.Manager for the pods it syncs.
// Readiness and startup results update the container's ready and started
// fields and the pod's Ready conditions at once (status.Manager), and
// sync the pod, as in the kubelet; a liveness or startup failure makes
// the runtime restart the container (ComputePodActions reads the
// results), within the probe's own terminationGracePeriodSeconds when it
// sets one. Each sync has the readiness probes of started containers
// that are not ready run at once (probes.Manager.Trigger), as the
// kubelet's status update does, so a container is ready as soon as it
// has started or its startup probe succeeded. When a pod is being
// terminated its liveness and startup probes stop before the kill, and its
// readiness probes run until its containers are gone, as in the kubelet.
//
// Active deadlines, as the kubelet's handler: a pod that has run on the
// node (from its status's start time) for its activeDeadlineSeconds or
// longer is recorded Failed with reason DeadlineExceeded and the message
// "Pod was active on the node longer than the specified deadline", gets
// a DeadlineExceeded event, and is killed by its worker within its grace
// period. The check runs on every sync of the pod, so an update that
// lowers the deadline of a running pod fails it at once; and each sync of
// a running pod asks its worker (podworkers.SyncBy) to be due when the
// deadline ends, so the sync loop syncs it at the first tick of its 1 s
// grid after that, as the kubelet's per-second check finds it, with no
// polling of the pods in between.
//
// Admission: each pod a source adds is admitted first, as the kubelet's
// HandlePodAdditions does, in order of creation and against the pods
// admitted before it that still hold resources: the admission package's
// chain (pressure, sysctls, OS, resources against Config.Allocatable,
// node affinity against Config.NodeLabels, node name, host ports,
// NoExecute Config.NodeTaints) followed by Config.AdmitHandlers. A
// refused pod is recorded Failed with the handler's reason and "Pod was
// rejected: <message>", gets a warning event, and is never started; its
// worker finishes it at once and leaves that status as it is, with no
// container status nor condition, as the kubelet's rejection writes it. Pods already terminal, or being terminated,
// are not admitted again. A critical pod that does not fit is admitted
// in place of the pods admission.Preempting picks: each is recorded
// Failed with reason Preempting, "Preempted in order to admit critical
// pod" and a DisruptionTarget condition, gets a warning event, and is
// killed by its worker within its own grace period
// (kubelet_preemptions counts them).
//
// Eviction (Config.Eviction, off by default): an eviction.Manager reads
// the node server's stats every 10s (with the default stats, each pod's
// volumes measured by the volume manager, so emptyDir sizeLimits are
// enforced) and evicts one pod per pass while a threshold is met; the agent records the pod Failed with reason Evicted
// and the kubelet's message (with a DisruptionTarget condition, reason
// TerminationByKubelet, when a threshold was met rather than a local
// storage limit) and has its worker kill it within the
// manager's grace period, freeing dead containers first when disk is
// short, and unused images through the image collector when
// Config.ImageGC is set (which also removes unused images every 5m above
// 85% image filesystem usage). Agent.Pressure reports the pressure
// conditions, which admission uses to refuse pods and kube.ConditionsFunc
// can put in the node status.
//
// Graceful node shutdown (Config.Shutdown; Agent.Shutdown, called by the
// embedder when the node is about to stop, while Run still runs), as the
// kubelet's node shutdown manager does: the pods are grouped by priority
// threshold (with GracePeriod and CriticalPodsGracePeriod: the regular
// pods, given GracePeriod − CriticalPodsGracePeriod, then the pods of
// priority 2000000000 and above, given CriticalPodsGracePeriod), and the
// groups are terminated lowest first. Each pod of a group is killed
// through its worker within its own grace period capped to the group's,
// and recorded Failed with reason Terminated, the message "Pod was
// terminated in response to imminent node shutdown." and a
// DisruptionTarget condition (reason TerminationByKubelet); the next
// group starts once the group's pods have stopped or its period has
// passed on the clock. From the call on, NodeHealth (the kube.Node's
// Ready) fails with "node is shutting down" and new pods are refused
// with reason NodeShutdown. It lives in the agent rather than a package
// of its own because it needs the agent's workers, its failure records
// (the status it writes) and its admission; the kubelet's systemd
// inhibitor lock, which tells it of a shutdown, is left to the embedder.
//
// Not here yet: mirror pods and the API server; they come with their
// packages.
package agent
