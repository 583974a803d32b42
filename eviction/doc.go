// Package eviction keeps a node from running out of memory, disk or
// process IDs the way the kubelet's eviction manager does: it compares
// the node's signals, read from a stats Summary (k8s.io/kubelet
// stats/v1alpha1), with thresholds, reports pressure conditions, frees
// disk at node level, and evicts pods one at a time.
//
// # Thresholds
//
// Thresholds use the kubelet's syntax and defaults. Parse reads the
// KubeletConfiguration maps (evictionHard, evictionSoft,
// evictionSoftGracePeriod, evictionMinimumReclaim); ParseFlag reads the
// command-line form ("memory.available<100Mi,nodefs.available<10%").
// Signals: memory.available, nodefs.available, nodefs.inodesFree,
// imagefs.available, imagefs.inodesFree, pid.available; values are
// quantities or percentages of the signal's capacity. A hard threshold
// acts at the first pass that sees it met; a soft one once it has been
// met for its grace period. A met threshold stays met until its value
// plus its minimum reclaim is available. The default, when
// Config.Thresholds is nil, is the kubelet's (DefaultHard).
//
// # A pass
//
// Run makes a pass every Config.MonitoringInterval (10s) on its clock:
//
//  1. the signals are read from Config.Summary;
//  2. the pressure conditions (MemoryPressure, DiskPressure,
//     PIDPressure) are those of the thresholds met, grace periods aside,
//     within Config.PressureTransitionPeriod (5m): a condition stays that
//     long after its threshold stopped being met. Pressure reports them;
//     it fits admission.PressureFunc and, through kube.ConditionsFunc,
//     the node status;
//  3. every active pod over a local storage limit is evicted (see
//     below); if any was, the pass ends there;
//  4. of the thresholds met past their grace period, memory first, one
//     is reclaimed: for a disk signal, Config.ReclaimContainers and
//     Config.ReclaimImages run first, and if the signals then show no
//     threshold met, no pod is evicted;
//  5. the active pods (Config.ActivePods) are ranked (Rank) and the
//     first that is not critical (static, mirror, or system priority) is
//     killed through Config.Kill, with a grace period of 1s for a hard
//     threshold or min(MaxPodGracePeriodSeconds, the pod's) for a soft
//     one, a warning event Evicted and the kubelet's message: "The node
//     was low on resource: memory. Threshold quantity: 100Mi, available:
//     50Mi. Container c was using 300Mi, request is 100Mi, has larger
//     consumption of memory. ". The killer (Eviction) records the pod
//     Failed with reason Evicted, that message and, as the kubelet
//     does, a DisruptionTarget condition (status True, reason
//     TerminationByKubelet, the same message).
//
// # Local storage limits
//
// With or without thresholds, each pass evicts, within 1s, every pod
// that is not critical and uses more local storage than it may, as the
// kubelet does with LocalStorageCapacityIsolation on. A pod is checked,
// in this order, for: an emptyDir volume whose usage in the Summary's
// volume stats exceeds its sizeLimit ("Usage of EmptyDir volume
// "scratch" exceeds the limit "100Mi". "); its ephemeral-storage
// usage exceeding the sum of its containers' ephemeral-storage limits,
// counted as the scheduler counts them ("Pod ephemeral local storage
// usage exceeds the total limit of containers 150Mi. "); a container or
// sidecar whose logs and writable layer (logs only, with
// DedicatedImageFs) exceed its own limit ("Container app exceeded its
// local ephemeral storage limit "100Mi". "). The kill, event and
// status are those of a threshold eviction, without the DisruptionTarget
// condition (the kubelet adds none here); kubelet_evictions counts them
// under emptydirfs.limit, ephemeralpodfs.limit and
// ephemeralcontainerfs.limit. As in the kubelet, a pod whose kill
// failed still ends the pass.
//
// # How it plugs in
//
// The package imports neither the agent, the server nor the pod workers:
// it takes a SummaryFunc (server.CRIStats's Summary), a func listing the
// active pods and a KillFunc, which the agent provides (its killer marks
// the pod Failed/Evicted and asks its pod worker to kill it). Admission
// of new pods under pressure is the admission package's Pressure
// handler, fed by Manager.Pressure.
//
// # Differences from the kubelet
//
//   - allocatableMemory.available and the containerfs signals are not
//     supported, nor are memcg threshold notifications: pressure is found
//     by polling only.
//   - Local storage capacity isolation cannot be turned off, and
//     memory-backed emptyDirs are checked against their sizeLimit too
//     (the kubelet's default; it skips them only with the alpha
//     InPlacePodVerticalScalingMemoryBackedVolumes gate).
//   - Disk ranking uses each pod's total ephemeral usage (the Summary's
//     pod ephemeral-storage, else its containers' root filesystems and
//     logs) for every disk signal, where the kubelet measures only the
//     filesystems on the pressured device.
//   - A pass acts on its signals even when the Summary has not changed
//     since the last pass (the kubelet skips thresholds whose stats are
//     not newer).
//
// # Usage
//
//	mgr, err := eviction.New(eviction.Config{
//		Summary:    stats.Summary,
//		ActivePods: activePods,
//		Kill:       kill,
//	})
//	go mgr.Run(ctx)
//	memory, disk, pid := mgr.Pressure()
package eviction
