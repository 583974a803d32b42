// Package volumes prepares a pod's volumes on the host before its
// containers start, and removes them once the pod is gone.
//
// A Plugin handles one type of volume; ObjectGetter and TokenGetter
// supply the API objects and tokens that configMap, secret and projected
// volumes show.
//
// # The volume manager
//
// Manager is the kubelet's volume manager. Its desired state is the pods
// the agent added (AddPod) and not removed (RemovePod), each with the
// volumes its containers mount; its actual state is the volumes set up on
// disk, each in its own directory,
//
//	<PodsDir>/<pod UID>/volumes/<plugin name, "/" as "~">/<volume name>
//
// the kubelet's layout (VolumeDir), so the directories of one survive the
// other. Run is the reconciler: woken when the desired state changes and
// when a retry or refresh falls due on the clock, it sets volumes up,
// sets Refresh volumes up again every Config.SyncPeriod (1 min), tears
// down the volumes of removed pods, and removes their volume directory. A
// failed operation is retried with a back-off per volume (500ms doubling
// to 2m2s) and sent as a Warning FailedMount event. Operations run
// concurrently, one at a time per volume, so a slow volume holds back
// only its own pod. A pass with nothing to do costs next to nothing (see
// BenchmarkReconcileIdle), so an idle node spends no CPU on volumes.
//
// The agent, as the kubelet does: adds a pod when it syncs it, waits with
// WaitForAttachAndMount before its containers are created, hands the
// manager to the runtime (HostPath implements runtime/cri.Volumes, which
// resolves subPath safely), removes the pod once its containers are gone
// and waits with WaitForUnmount, and once every pod source has delivered
// its pods calls CleanupOrphans, which removes the volumes and
// directories of pods no source wants any more, left by an earlier run.
//
// WaitForAttachAndMount returns the kubelet's error,
//
//	unmounted volumes=[cache data], unattached volumes=[], failed to process volumes=[data]: pod default/web: spec.volumes[1] (data): no volume plugin supports its type (nfs)
//
// at once when the pod has bad input (a volumeMount naming no volume of
// the pod, a volume no plugin supports) or a volume's last SetUp failed,
// rather than after the kubelet's 2-minute wait; the agent then retries
// the pod with its back-off, and other pods are not held up.
//
// Managed volumes (emptyDir, and the API-content ones) take the pod's
// fsGroup after each SetUp, as the kubelet gives it: group ownership,
// group read and write (read only for ReadOnly content), search and
// setgid on directories; with fsGroupChangePolicy OnRootMismatch only
// when the volume's root lacks them. A hostPath volume is never changed.
//
// # Built-in plugins
//
// EmptyDir ("kubernetes.io/empty-dir") is a directory of mode 0777, or
// with medium Memory a tmpfs sized by the volume's sizeLimit or the pod's
// memory limit (when every container has one), whichever is smaller;
// without either it is unsized (the kernel's half of RAM), where the
// kubelet would bound it by the node's allocatable memory, which nodekit
// does not know. HugePages media are not supported. HostPath
// ("kubernetes.io/host-path") checks its path against the volume's type
// as the kubelet does, with the kubelet's messages, creates it for
// DirectoryOrCreate (0755) and FileOrCreate (0644, in an existing
// directory), and hands the runtime the path itself. DefaultPlugins
// lists them; Config.Plugins replaces or extends the list. Package
// volumestest has a scriptable fake plugin and TestPlugin, a conformance
// check for plugins of one's own.
//
// Metrics, on Config.Registerer, are the kubelet's:
// volume_manager_total_volumes{plugin_name, state} and
// storage_operation_duration_seconds{volume_plugin, operation_name,
// status, migrated}.
//
// Not here: persistent volumes and claims, CSI, attach and detach, block
// devices (volumeDevices), SELinux relabelling, the quota-based size
// accounting of emptyDir, and the kubelet's other volume metrics
// (reconstruction counters, volume stats).
package volumes
