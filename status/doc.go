// Package status computes pod statuses the way the kubelet does and keeps
// them.
//
// Generate is a pure function from a pod's spec, the runtime's latest
// observation (runtime.PodStatus), the previous status, the last sync's
// waiting reasons, the probes' verdicts and how far the pod is in its
// termination (Input.Stage) to a v1.PodStatus:
//
//   - container statuses (init, regular, ephemeral): state from the
//     newest instance; last state from the one before, or from the newest
//     when it is waiting to restart; restart count; ready (running,
//     started, and ready by its readiness probe if it has one; a regular
//     init container is ready once it completed with exit code 0, never
//     while it runs); started (running, and past its startup probe if it
//     has one); waiting reasons ContainerCreating, PodInitializing (every
//     container of a pod with init containers, init containers included,
//     before it first runs), or the sync's (ErrImagePull,
//     CrashLoopBackOff, CreateContainerConfigError...) on a container the
//     next sync starts (again). A container the runtime no longer has
//     keeps its terminated state; one that ran and vanished shows a last
//     state terminated with ContainerStatusUnknown and exit code 137 (and
//     one more restart unless the pod is being deleted); one in the
//     runtime's unknown state that was running is terminated with
//     ContainerStatusUnknown; an init container gone from a pod whose
//     regular containers exist is taken as completed. As the kubelet does
//     with its RestartAllContainersOnContainerExits feature (on by
//     default since Kubernetes 1.37), a restart count never goes below
//     the previous status's, a new instance takes the previous one's
//     termination (else the previous last state) as its last state when
//     the runtime no longer has the instance before it, and one that runs
//     again after the previous status showed it terminated counts one
//     more restart when the runtime's count did not move;
//   - a restart of all containers (a restart rule with the action
//     RestartAllContainers matched an exit, runtime.RestartAllTriggered,
//     or the previous status shows one under way): every container the
//     runtime no longer has and that was not waiting is reported waiting
//     with reason RestartingAllContainers, with a last state terminated
//     with that reason and exit code 137, and one more restart; a
//     container so reported, or one that exited with such a code, counts
//     as one that restarts for the phase, so a pod with restartPolicy
//     Never stays Running (Pending while its init containers run again)
//     instead of failing;
//   - the phase with the kubelet's rules: Pending while init containers
//     run or containers wait; Running while a container runs or is to
//     restart; Succeeded or Failed when all have stopped and none is to
//     restart (a failed init container that is not to run again fails the
//     pod); a terminal phase never changes. Whether a stopped container
//     restarts is decided per container as the kubelet's
//     ContainerRestartRules feature does (on by default since Kubernetes
//     1.35): by its restartPolicyRules on its last exit code, else its own
//     restartPolicy, else the pod's (Always; OnFailure after a non-zero
//     code; Never). The same rule puts the sync's waiting reason on a
//     container that is to restart. Ephemeral containers have statuses of
//     their own (never ready, without a started flag) and no part in the
//     phase or the conditions. Sidecars (init containers with restartPolicy
//     Always) count with the regular containers: a running sidecar keeps
//     the pod Running, so a Never pod whose regular containers finished
//     turns Succeeded or Failed only once its sidecars have stopped; a
//     stopped or crash-looping sidecar counts for nothing; a sidecar that
//     runs but has not passed its startup probe keeps the pod Pending
//     only until a regular container exists in the current sandbox.
//     When no previous status is given, the pod's own status (as the API
//     server has it) is the previous one, and a terminal phase there is
//     kept too;
//   - the termination, from Input.Stage: once the pod's containers were
//     stopped for good (Stopped, the kubelet's podIsTerminal) the phase
//     is Succeeded or Failed by the containers' exits whatever the
//     restart policy; the final status (Terminated, the kubelet's
//     TerminatePod) reports every container that has not terminated as
//     terminated with ContainerStatusUnknown and exit code 137, and a pod
//     still Pending or Running as Failed. Static pods (a
//     kubernetes.io/config.source other than "api") are the kubelet's
//     exception: their phase keeps following the restart policy, so a
//     static pod with restartPolicy Always ends Running;
//   - the pod's reason and message, kept from the previous status (or,
//     when it has none, from the API's) while the phase stays the same,
//     and dropped when the phase changes;
//   - the conditions PodReadyToStartContainers, Initialized, Ready,
//     ContainersReady and PodScheduled, in the kubelet's order, and
//     AllContainersRestarting last on a pod with a RestartAllContainers
//     rule, with its reasons and messages, and transition times kept
//     while the status does not change: AllContainersRestarting True with
//     RestartAllContainersStarted from the exit that starts a restart of
//     all containers until the runtime has none of the pod's init and
//     regular containers left, False otherwise (PodCompleted or PodFailed
//     once the pod has ended); ContainersNotReady "containers with unready
//     status: [a b]" (and "containers with unknown status: [...]");
//     ContainersNotInitialized "containers with incomplete status:
//     [...]"; ReadinessGatesNotReady naming each gate that is missing or
//     not True (NeedToReconcileReadiness tells a caller when a pod's
//     gates, set by others, have moved away from its Ready); PodCompleted on Initialized, ContainersReady and Ready
//     once the pod has Succeeded, PodFailed on ContainersReady and Ready
//     once it has Failed; PodSandboxNotReady on PodReadyToStartContainers
//     with the kubelet's message ("no pod sandbox exists", "pod sandbox
//     is not ready"...). PodReadyToStartContainers is True exactly when
//     runtime.SandboxChanged, the rule the sync decides with, says no new
//     sandbox is needed: not with several ready sandboxes, a stopped
//     newest one, a network namespace that does not match
//     spec.hostNetwork, or a pod-network sandbox without an IP. Sidecars count in ContainersReady (and so in
//     Ready) like regular containers. Initialized turns True once every
//     regular init container completed and every sidecar started, or once
//     a regular container has started, and then stays True (a sidecar
//     restarting later, or a pod initializing again in a new sandbox,
//     does not undo it);
//   - the conditions of the pod's own status (the API server's) that the
//     kubelet does not own (OwnedByKubelet: a readiness gate's, a
//     DisruptionTarget another component set), kept as they are, first,
//     as the kubelet keeps them;
//   - pod and host IPs, start time and QoS class;
//   - observedGeneration: the pod's metadata.generation, on the status and
//     on each condition Generate makes, as the kubelet records it
//     (PodObservedGenerationTracking, locked on since 1.35); 0, so absent,
//     for a static pod. kube.StatusSink never takes the API's value back
//     to an older generation;
//   - resources, as the kubelet reports them with its default feature
//     gates (InPlacePodVerticalScaling, InPlacePodLevelResourcesVerticalScaling,
//     SupplementalGroupsPolicy; not ContainerStopSignals, off by default,
//     so no stopSignal). Input.Pod is the pod as allocated: with the
//     requests and limits the node gave it (the agent's allocation, which
//     an in-place resize changes once it is accepted). A container status
//     made from a runtime instance carries allocatedResources (the
//     allocated requests), user (the
//     process's UID, GID and supplemental groups as the runtime reports
//     them, nil when it reports none) and resources: the spec's
//     requirements (an empty, non-nil value when there are none) for a
//     container that does not run; for a running one the same, with the
//     CPU limit (from the CFS quota and period), CPU request (from the
//     CPU shares) and memory limit the runtime reports taking their place
//     where the spec has limits, respectively requests (a CPU figure at or
//     below the cgroup floor, 10m for the limit and 2m for the request,
//     on both sides keeps the spec's), and a figure the runtime does not
//     report kept from the previous status of the same running container,
//     else the spec's. A container without an instance (waiting to be
//     created) reports none of them, and one gone from the runtime keeps
//     what its terminated status had. The pod's allocatedResources are its
//     effective requests (k8s.io/component-helpers/resource.PodRequests:
//     pod-level requests where set, else the containers' aggregated, plus
//     overhead) and its status.resources are spec.resources with those
//     requests and the matching limits (PodLimits); a pod without any
//     resources gets empty, non-nil values, as from the kubelet. For a
//     pod the API shows Running whose cgroup's settings the runtime
//     gives (Input.PodCgroup, runtime.PodCgroupReader), status.resources
//     has the cgroup's CPU request (from the shares), CPU limit (from the
//     quota) and memory limit instead, as the kubelet reads them back, so
//     an allocated resize not yet carried out shows as such;
//   - the in-place resize conditions the caller gives (Input.ResizePending,
//     Input.ResizeInProgress): PodResizePending (reason Deferred or
//     Infeasible) and PodResizeInProgress (no reason, or Error with why),
//     True, probed now, their transition time kept while the reason
//     stays; PodResizeInProgress's observedGeneration is the pod's
//     generation when the resize was accepted
//     (Input.ResizeAcceptedGeneration), as the kubelet keeps it while the
//     resize lasts; a pod that has ended has neither.
//
// Generate differs from the kubelet where nodekit lacks what the
// kubelet's behaviour rests on, or where the kubelet's own data is not at
// hand:
//
//   - Generate never fails a pod with a reason of its own (the kubelet's
//     admission, eviction and active-deadline handlers, which set Failed
//     with OutOfcpu, Evicted or DeadlineExceeded): the agent sets phase,
//     reason and message over the generated status for the pods it
//     rejected, evicted or found past their activeDeadlineSeconds;
//   - a container's image is the spec's, not the name the runtime
//     reports (the runtime's is used only when the spec has none);
//   - in the final status, whether the pod ever initialized is read from
//     the previous status, where the kubelet reads its copy of the API's;
//   - a container whose sandbox the runtime does not report counts as in
//     the current sandbox when deciding whether the pod has initialized;
//   - a Running pod's status.resources come from the settings the
//     runtime last gave its cgroup, where the kubelet reads the cgroup
//     files; a limit the cgroup does not have keeps the previous value,
//     where the kubelet on cgroup v1 reports the "no limit" figure
//     (9223372036854771712 bytes) as the memory limit. Without
//     Input.PodCgroup (a runtime that manages no pod cgroups) they are
//     the effective allocated values, as in any other phase;
//   - a running container whose runtime reports no resources keeps the
//     figures of its previous status (else the allocated ones), where the
//     kubelet first takes those it recorded when it started or resized
//     the container.
//
// Manager keeps the latest status of each pod with a version, merges the
// probes' readiness and startup verdicts (SetContainerReadiness,
// SetContainerStartup) into it at once, and pushes changes to a Sink from
// Run: MemorySink, SinkFunc, or a sink of your own (kube.StatusSink
// writes them to the API server).
//
// Before the Manager has a status of a pod, the pod's own status (the
// API server's) stands for the last one. A status's start time is the
// last one's when that has one, else its own, else the time it is
// recorded (a pod rejected at admission gets one so), and never changes
// after; its observed generation never goes back.
//
// A status that shows a container the last status showed terminated as
// no longer terminated, though nothing restarts it (a pod with
// restartPolicy Never, or OnFailure after exit code 0, and no restart
// rule or policy of the container's own that restarts it), is dropped
// with an error in the log, as the kubelet's status manager drops it:
// it can only come from a fault in what made it.
//
// A status is normalized when it is recorded, as the kubelet's status
// manager does before it compares and keeps one: its times (start,
// conditions' probe and transition, containers' start and finish) are cut
// to whole seconds, the precision the API server keeps; each terminated
// container's message is cut to its share of
// MaxTerminationMessagesLength (12 KiB divided by the pod's containers of
// every kind), on a character boundary; regular and ephemeral container
// statuses are put in name order, init containers' in the spec's. A
// status whose normalized form equals the last one (semantically, as
// equality.Semantic decides, so a time in another zone or a quantity in
// another format is no change), other components' conditions aside (as
// the kubelet's status manager, which keeps the last status then), keeps
// its version and is not pushed. The
// test compares the two statuses' protobuf encodings first, a fifteenth
// of the cost of the reflective comparison that it leaves for statuses
// whose encodings differ (BenchmarkSetPodStatusUnchanged).
//
// The Manager keeps a verdict only while it can count: a changed status
// of a pod drops the verdicts of its containers (init, regular,
// ephemeral) that the status no longer shows or shows terminated, a
// verdict for such a container or for an unknown pod is not recorded,
// and RemovePod drops all of the pod's. Memory therefore follows the
// live containers, however often they restart, and pruning costs the
// pod's own containers, not every verdict of the node.
//
// Run pushes a change as soon as it is recorded. It arms a timer only
// after the sink refused a status: the first retry comes after
// Config.RetryPeriod, each further failure in a row doubles the wait up
// to Config.MaxRetryPeriod, and a push that succeeds disarms it. With
// nothing to push, the Manager never wakes the process.
//
// With Config.CouldHaveRunningContainers (the agent passes its pod
// workers' view) a terminal phase is held back from the sink while the
// pod's containers may still run, as the kubelet's status manager holds
// it back from the API server: the sink gets the status with the phase,
// reason and message it last accepted (before its first, the pod's own,
// the API server's; Pending when that has none) and without the node's
// DisruptionTarget, and the whole status once the pod has stopped: at
// the status's next change, at Resend (Run sends it again, without
// waiting; a Resend made while the sink is being sent a status that gets
// held back sends it again once that call ends,
// TestManagerResendDuringAHeldBackPushIsKept), or at Flush (sent at once, in the caller's goroutine, after
// any sink call under way, as long as its ctx allows; a failure is
// retried by Run after its back-off). The Manager's own status
// (GetPodStatus, Pods) is never held back. Sink calls, from Run and
// Flush, are made one at a time, each with the status current when it
// starts.
//
// A recorded status is never written again: each change records a new
// copy. GetPodStatus returns a copy the caller owns; PeekPodStatus the
// recorded status itself, which stays as it was whatever the pod's status
// does later and which its caller must only read
// (TestPeekPodStatusStaysAsItWas), for the agent's status generation,
// which reads the previous status at every sync.
//
// Reconcile is told of a pod as the sink's store has it (the API
// server's, from a watch): a sink that is a Reconciler (kube.StatusSink)
// says whether that differs from what it would write, and the status is
// then sent again, as the kubelet's status manager restores a status
// another writer changed: at once, or, within ReconcileInterval (10 s)
// of the pod's last such write, at its first status update past the
// interval, so another writer that keeps changing it meets one write per
// interval. The agent calls it for every change its sources report
// (UPDATE and RECONCILE), so it costs no timer; the kubelet compares
// every 10 s instead. A status the sink got held back is not reconciled.
//
// # Metrics
//
// The Manager is a prometheus.Collector of the kubelet's
// kubelet_terminated_containers_total (labels container_type, exit_code
// and reason): each termination counts once, when a recorded status
// first shows it, against the last status or, before one, the pod's own. Register it on a registry of your own; agent.Agent registers it
// on Config.Registry.
//
// # Change notification
//
// Subscribe hands out a channel that receives a value whenever a pod's
// status changes (its version grows) or a pod is removed, so a consumer
// (a live view, a cache, an exporter) reads the statuses again only
// when something changed, instead of polling. Changes coalesce: the
// channel has capacity 1 and is sent to without blocking, so a slow
// reader finds one pending value however many changes it missed, and
// never holds the Manager up. No goroutine runs per subscriber. The
// cancel function unregisters the subscriber and closes its channel.
//
//	changes, cancel := m.Subscribe()
//	defer cancel()
//	for range changes {
//		render(m.Pods())
//	}
//
// # Usage
//
//	m := status.New(status.Config{Sink: &status.MemorySink{}})
//	go m.Run(ctx)
//	st := status.Generate(status.Input{Pod: pod, Runtime: observed, Now: now})
//	m.SetPodStatus(pod, st)
package status
