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
// evictionSoftGracePeriod, evictionMinimumReclaim, and
// enforceNodeAllocatable: with "pods" in it, each hard memory.available
// threshold is copied to allocatableMemory.available); ParseFlag reads
// the command-line form ("memory.available<100Mi,nodefs.available<10%").
// Values are quantities or percentages of the signal's capacity. A hard
// threshold acts at the first pass that sees it met; a soft one once it
// has been met for its grace period. A met threshold stays met until its
// value plus its minimum reclaim is available. The default, when
// Config.Thresholds is nil, is the kubelet's: DefaultHard and
// allocatableMemory.available<100Mi.
//
// # Signals
//
// Each signal is read from the Summary as the kubelet reads it:
//
//   - memory.available: node.memory.availableBytes, of available plus
//     working set;
//   - allocatableMemory.available: the memory left to the pods together.
//     The kubelet reads it from the Summary's "pods" system container
//     (its allocatable cgroup), and so does nodekit when the Summary has
//     one; without it, it is Config.AllocatableMemory (the agent's
//     Config.Allocatable memory) less the pods' working sets;
//   - nodefs.available, nodefs.inodesFree: node.fs;
//   - imagefs.available, imagefs.inodesFree: node.runtime.imageFs;
//   - containerfs.available, containerfs.inodesFree:
//     node.runtime.containerFs, the filesystem of the containers'
//     writable layers (without it, the figures of the filesystem the
//     layers live on).
//     As in the kubelet, their thresholds are not configured but copied
//     from nodefs's (one filesystem, or a split image filesystem:
//     Config.SplitImageFs) or imagefs's (Config.DedicatedImageFs);
//   - pid.available: node.rlimit, maxpid less curproc.
//
// Memory signals raise MemoryPressure, disk ones DiskPressure,
// pid.available PIDPressure.
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
//  4. of the thresholds met past their grace period, memory ones first,
//     one is reclaimed: for a disk signal, the node-level reclaims that
//     help it run first (Config.ReclaimContainers, Config.ReclaimImages:
//     the kubelet's table, by layout), and if the signals then show no
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
// # Ranking
//
// Rank orders pods as the kubelet does: for memory, the pods without
// stats, then those over their request, then by priority, then by usage
// above the request; for disk, the same with the disk usage the signal's
// filesystem holds: with one filesystem, the containers' writable
// layers and logs and the pod's local volumes (emptyDir on disk,
// hostPath, configMap, gitRepo); with DedicatedImageFs, logs and volumes
// for nodefs, the writable layers for imagefs and containerfs; with
// SplitImageFs, everything for nodefs and containerfs and nothing for
// imagefs (images are charged to no pod). For PIDs: priority, then
// process count. Each pod's figures are read once per pass: a pass that
// ranks 1000 pods takes 6 to 10 ms on two shared cores
// (BenchmarkSynchronize1000).
//
// # Triggers
//
// A pass runs on the MonitoringInterval only. The kubelet can also run
// one when the kernel reports that memory usage crossed a threshold
// (memcg notifications, kernelMemcgNotification: false by default):
// it arms an eventfd on the memory cgroup's memory.usage_in_bytes
// through cgroup.event_control, which exists on cgroup v1 only. On a
// cgroup v2 host its notifier is a stub that never fires
// (threshold_notifier_linux.go returns a disabled notifier when the
// unified hierarchy is mounted, pending memory.events or PSI), so
// there, as here, the monitoring period is the only trigger. nodekit
// does not implement the cgroup v1 notifier: on a cgroup v1 host with
// kernelMemcgNotification on, the kubelet may act up to one period
// sooner on memory.
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
//   - Memory threshold notifications are not implemented (see
//     Triggers); they matter only on cgroup v1 hosts.
//   - Whether images have a filesystem of their own is configured
//     (Config.DedicatedImageFs, Config.SplitImageFs), where the kubelet
//     asks cAdvisor which devices they are on.
//   - Local storage capacity isolation cannot be turned off, and
//     memory-backed emptyDirs are checked against their sizeLimit too
//     (the kubelet's default; it skips them only with the alpha
//     InPlacePodVerticalScalingMemoryBackedVolumes gate).
//   - A pod whose stats have no container or volume filesystem figures
//     at all is ranked for disk by the Summary's pod ephemeral-storage
//     total, where the kubelet counts it as using nothing.
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
