// Package podworkers runs one serialized worker per pod UID with the
// kubelet's pod lifecycle (pkg/kubelet/pod_workers.go):
//
//	syncing ──(kill, deletion, or a terminal phase)──▶ terminating ──▶ terminated
//
// # State machine and driver
//
// The package is split the way etcd's raft splits RawNode from Node:
//
//   - Machine is the lifecycle of every pod as a pure state machine: no
//     goroutine, no clock, no lock, no I/O. It is driven by explicit
//     inputs: Update (an update arrived at time T), Finish (the step
//     ended with this result at T) and the time passed to Next and Due
//     (now is T). It answers with what to do next: Next hands out the
//     pod's next Step (which handler method, with which spec, update
//     type, grace period and status view time), RetryAt says when a
//     failed terminating step may run again, Due lists the syncing pods
//     to resync and NextDue says when the next one is due, and the
//     effects returned by Update and Finish say when a worker must
//     start, be woken or have its SyncPod cancelled, and when the pod is
//     due again. Its tests drive it directly, with no waiting.
//   - PodWorkers is the driver: it owns a Machine behind a mutex, the
//     pods' goroutines that take each pod's steps one at a time, the
//     clock, the retry timers, the cancellation of steps, and the
//     recovery of panics. It reads the runtime's view from the
//     StatusCache and calls the SyncHandler.
//
// A pod has a goroutine, never more than one, only while it has a step
// to take or a failed step's back-off to wait out: the goroutine returns
// when the machine has nothing for the pod, and the pod's next update
// starts another. Where the kubelet parks a goroutine per pod for the
// pod's whole life, a node of pods that run and sync once a minute holds
// no worker goroutine between syncs (TestIdleWorkersHoldNoGoroutine):
// with 1000 pods, about 5 MB of parked stacks less.
//
// UpdatePod never blocks: it records the update and wakes the pod's
// goroutine, or starts it. An update that arrives while a step runs replaces any
// pending one, so the next step sees the latest spec (a periodic
// SyncPodSync never replaces a more important pending update). Each step
// of a pod with a spec first reads the runtime's view from the
// StatusCache with GetNewerThan(the end of its previous step), so a
// worker never acts on a view that may predate its own last action (the
// kubelet's lastSyncTime).
//
// Rules kept from the kubelet:
//   - once termination is requested a pod never syncs again, and its
//     worker never starts again; a SyncPodCreate for the same UID (a
//     static pod's manifest removed and put back) is remembered, and once
//     the worker finished SyncKnownPods forgets it, so that the caller
//     starts the pod afresh;
//   - grace periods only shorten: the pod's own (the deletion grace
//     period, else the spec's, else 30 s), shortened by a kill's
//     override, never lengthened by one, and a shorter one cancels the
//     kill in progress (see Cancellation); a pod whose SyncPod reports a
//     terminal phase gets the same, since its sidecars may still run;
//   - a pod whose sync reports a terminal phase, or whose spec is deleted
//     or in a terminal phase, is terminated;
//   - pods known only to the runtime (orphans: an update with a
//     RunningPod and no Pod) can only be killed: such an update is
//     ignored unless it is a SyncPodKill, and the kill goes through
//     SyncTerminatingRuntimePod;
//   - only one static pod (annotation kubernetes.io/config.source other
//     than "api") per namespace/name runs: a replacement waits until its
//     predecessor terminated, and one killed while it waits never starts:
//     it is finished at once, with no step, and holds up no one;
//   - SyncKnownPods terminates workers whose pods left the config and
//     forgets finished ones that are no longer desired or were created
//     again;
//   - CouldHaveRunningContainers answers the status manager's question
//     (status.Config.CouldHaveRunningContainers): a pod's containers may
//     run until its terminating step has succeeded, and a pod without a
//     worker may until SyncKnownPods first ran.
//
// # Retries and back-off
//
// Every failed step is retried: a failed status read (the handler then
// does not run, and the next step waits for the same view), an error from
// SyncPod, SyncTerminatingPod, SyncTerminatingRuntimePod or
// SyncTerminatedPod, and a panic in any of them.
//
//   - The delay after a failed step is BackOffPeriod (10 s), as in the
//     kubelet. With MaxBackOffPeriod set above it, the delay doubles with
//     each further consecutive failure of the pod up to that cap (with
//     1 min: 10 s, 20 s, 40 s, 1 min, 1 min...); a successful step, or a
//     move to terminating, starts again from BackOffPeriod.
//   - A sync refused because a back-off is running (an error holding a
//     runtime.BackOffError, as runtime/cri returns for CrashLoopBackOff)
//     is retried when that back-off ends, at most ResyncInterval later,
//     as the kubelet does: a crash-looping container restarts on the
//     back-off's schedule, not later.
//   - A syncing pod is due again ResyncInterval (1 min) after a
//     successful sync, or after the back-off after a failure, or earlier
//     when the handler asked with SyncBy (the agent asks for the end of
//     a pod's active deadline); Due reports it, and the sync loop sends
//     it a SyncPodSync with the latest spec.
//   - The sync loop sleeps until the earliest due time, which NextDue
//     returns, instead of asking Due on a fixed tick. When a pod becomes
//     due before that time (a sync that failed sets a retry 10 s away
//     while every other pod is due in a minute, or a SyncBy), the
//     channel DueChanged receives, and the loop asks NextDue again. No
//     goroutine or timer is kept per pod for this: NextDue looks at
//     every pod, once per wake-up of the loop.
//   - A terminating or terminated pod is retried by its own worker when
//     the back-off ends, with the spec it has: the caller may already
//     have forgotten the pod (a removed static pod), and a replacement
//     with the same name waits for it. Due never reports such a pod.
//   - An update that arrives during a back-off runs at once.
//   - A panic in the handler is recovered in the pod's goroutine, logged
//     with the pod and the stack, counted in
//     nodekit_podworkers_sync_panics_total (registered on
//     Config.Registerer), and treated as a failed step.
//
// # Cancellation
//
// Each step runs with its own context. When termination is requested
// while the pod's SyncPod runs (a kill, a deletion, a terminal phase in
// the spec), that SyncPod's context is cancelled, so a hung pull or hook
// cannot hold up termination; the terminating step follows at once. A
// kill that arrives while the terminating step runs with a longer grace
// period cancels that step too, and the next one kills with the shorter
// grace period at once, as the kubelet does: a forced deletion does not
// wait out the grace period of the deletion before it. When
// Run's context ends every step's context ends, and Run returns once
// every goroutine returned.
//
// # Differences from the kubelet
//
//   - The kubelet retries a failed step after a constant 10 s plus up to
//     50% random jitter; here the back-off doubles up to the cap, so a
//     pod that keeps failing costs less, and has no jitter, so that due
//     times are exact and testable with a fake clock (the sync loop sends
//     the due pods in one batch per tick anyway).
//
// # Usage
//
// The driver:
//
//	pw, err := podworkers.New(podworkers.Config{Handler: h, Cache: plegCache, Registerer: reg})
//	go pw.Run(ctx)
//	pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod})
//	// The sync loop: sleep until the next due time or an earlier one
//	// appears, then resync the due pods.
//	next, ok := pw.NextDue() // !ok: nothing is due; wait for DueChanged only
//	select {
//	case <-clk.After(next.Sub(clk.Now())):
//		for _, uid := range pw.Due(clk.Now()) { /* send a SyncPodSync */ }
//	case <-pw.DueChanged(): // ask NextDue again
//	}
//
// The state machine, driven by hand:
//
//	m := podworkers.NewMachine(podworkers.MachineConfig{})
//	m.Update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod}, now)
//	step, ok := m.Next(pod.UID, now) // ok: run step (here SyncPod)
//	eff := m.Finish(pod.UID, podworkers.StepResult{Err: err}, now)
package podworkers
