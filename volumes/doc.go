// Package volumes prepares a pod's volumes on the host before its
// containers start, and removes them once the pod is gone.
//
// A Plugin handles one type of volume; ObjectGetter and TokenGetter
// supply the API objects and tokens that configMap, secret and projected
// volumes show.
//
// # Content volumes
//
// ConfigMapPlugin, SecretPlugin, DownwardAPIPlugin and ProjectedPlugin
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
// a projected serviceAccountToken is 0600 when the pod has an fsGroup.
// An optional configMap or secret that does not exist gives an empty
// volume, and an item whose key it lacks is skipped; when not optional
// both are errors, the first wrapping runtime.ErrNotFound.
//
// Secret, downwardAPI and projected content lives on a tmpfs mounted on
// the volume directory through an injected mount.Interface
// (k8s.io/mount-utils), which TearDown unmounts before removing the
// directory; configMaps stay on the disk. Objects is an in-memory
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
//   - The tmpfs has the kernel's default size and no noswap option; the
//     kubelet sizes it to the pod's memory limit. A nil mount.Interface
//     keeps the files on the disk, for agents that may not mount.
//   - clusterTrustBundle and podCertificate projections are refused with
//     an error; the user and defaultUser fields (alpha in the kubelet,
//     off by default) are ignored.
//   - The token cache drops expired tokens when it stores one instead of
//     running a collector goroutine.
package volumes
