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
// to 2m2s); a failed SetUp is also sent as a Warning FailedMount event
// (a failed teardown is logged, as the kubelet does). Operations run
// concurrently, one at a time per volume, so a slow volume holds back
// only its own pod, and RemovePod cancels a SetUp still running, so a
// hung getter does not hold back the pod's teardown. A pass with nothing to do costs next to nothing (see
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
// The walk that gives the group works on descriptors opened with
// O_NOFOLLOW, so a symlink a container plants or swaps in is never
// followed, and it does not descend into a mount point beneath the
// volume (the kubelet's walk does both).
//
// Teardowns, and the removal of an orphaned pod's directory, never
// follow a symlink and never cross a mount point: a bind mount left
// beneath a volume keeps its content, and the teardown fails naming it
// until it is unmounted.
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
// Manager.VolumeStats measures a pod's volumes under the pods directory
// (every volume but hostPath) as the kubelet's du-based volume metrics
// do: the bytes of the blocks their files hold and the inodes they use,
// on their own filesystem only, with its capacity and free space; the
// stats summary carries them, and the eviction manager enforces emptyDir
// sizeLimits with them. Each call walks the files afresh (the kubelet
// caches the figures for a minute).
//
// Metrics, on Config.Registerer, are the kubelet's:
// volume_manager_total_volumes{plugin_name, state} and
// storage_operation_duration_seconds{volume_plugin, operation_name,
// status, migrated}.
//
// Not here: persistent volumes and claims, CSI, attach and detach, block
// devices (volumeDevices), SELinux relabelling, the quota-based size
// accounting of emptyDir, and the kubelet's other volume metrics
// (reconstruction counters, volume stats metrics).
//
// # Content volumes
//
// ConfigMap, Secret, DownwardAPI and Projected
// show API content as files. Each SetUp gathers the files first (a
// missing object, key or field fails before anything is written or
// mounted) and writes them with an AtomicWriter, as the kubelet does:
//
//	<volume dir>/
//	  ..2026_03_04_05_06_07.123456/   a generation: the files themselves
//	  ..data -> ..2026_03_04_05_06_07.123456
//	  key    -> ..data/key            one symlink per top-level name
//	  dir    -> ..data/dir            ("dir/key" is reached through "dir")
//
// An update writes a new generation beside the current one, switches
// "..data" to it with a single rename and removes the old one, so a
// reader never sees a half-written set; when nothing changed (same paths,
// same bytes) nothing is written at all. The pod's fsGroup is given to a
// new generation before the switch, so a non-root container can read
// every file the moment it appears.
//
// Modes follow the API: defaultMode (0644 when unset), or an item's mode;
// a projected serviceAccountToken is 0600 when the pod has an fsGroup
// (0640 once the group gets read), as the kubelet writes it. A missing
// object is reported in the kubelet's words, `configmap "settings" not
// found`.
// An optional configMap or secret that does not exist gives an empty
// volume, and an item whose key it lacks is skipped; when not optional
// both are errors, the first wrapping runtime.ErrNotFound.
//
// Secret, downwardAPI and projected content lives on a tmpfs mounted on
// the volume directory through an injected mount.Interface
// (k8s.io/mount-utils), which TearDown unmounts before removing the
// directory; configMaps stay on the disk.
//
// Every built-in plugin is built from one PluginConfig (Mounter,
// Objects, Tokens, Allocatable, Clock, NoTmpfs), as DefaultPlugins
// builds them: NewEmptyDir(cfg), NewHostPath(), NewConfigMap(cfg),
// NewSecret(cfg), NewDownwardAPI(cfg), NewProjected(cfg). Only
// NewConfigMap and NewSecret fail, when cfg.Objects is nil. A nil
// Mounter means the host's, mount.New(""), for all of them;
// NoTmpfs keeps everything on the disk for an agent that may not
// mount (a Memory emptyDir then fails to set up). For example:
//
//	cfg := volumes.PluginConfig{Objects: objects, Clock: clk}
//	secrets, err := volumes.NewSecret(cfg) // tmpfs through mount.New("")
//	plugins := append(volumes.DefaultPlugins(cfg), mine)
//
// Objects is an in-memory
// ObjectGetter, and volumestest.Tokens an in-memory TokenGetter.
// Projected tokens are cached and asked for again at 80% of their
// lifetime or after 24 hours, a failed refresh keeping the cached token
// until it expires, as the kubelet's token manager does.
//
// Writes never leave the volume directory: a path with "..", an absolute
// path, a name starting with ".." (the writer's own), two paths that
// collide (the same after cleaning, or a file that would be another's
// directory) and anything planted in place of the writer's entries (a
// symlink for "..data", a visible name or inside a generation) are
// refused with an error naming the path and wrapping ErrUnsafePath,
// before anything is changed; files are created relative to directory
// descriptors with O_NOFOLLOW, and removals never follow a symlink.
//
// Where nodekit differs from the kubelet, and why:
//   - Colliding paths and planted symlinks are refused; the kubelet lets a
//     later path overwrite an earlier one and keeps whatever a visible
//     name already is.
//   - A failed update keeps the previous content; the kubelet tears the
//     volume down.
//   - A content volume's directory is 0755 (2755 with an fsGroup); the
//     kubelet's is 0777, 1777 on a tmpfs. Nothing but the agent writes
//     there: content volumes are mounted read-only into containers,
//     whatever their volumeMount says, as the kubelet mounts them
//     (Manager.MountReadOnly, which runtime/cri asks).
//   - The tmpfs has the kernel's default size and no noswap option; the
//     kubelet sizes it to the pod's memory limit. PluginConfig.NoTmpfs
//     keeps the files on the disk, for agents that may not mount.
//   - clusterTrustBundle and podCertificate projections are refused with
//     an error; the user and defaultUser fields (alpha in the kubelet,
//     off by default) are ignored.
//   - The token cache drops expired tokens when it stores one instead of
//     running a collector goroutine.
package volumes
