package volumes

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Plugin sets up and tears down one type of volume. The manager finds a
// volume's plugin with CanSupport, in the order of Config.Plugins, and
// calls SetUp and TearDown from its reconciler, one call at a time per
// volume; calls for different volumes may run concurrently, so a plugin
// must be safe for concurrent use.
type Plugin interface {
	// Name names the plugin as the kubelet names its built-in ones
	// ("kubernetes.io/empty-dir"). It must be unique in the registry; it
	// names the directory of the plugin's volumes (see VolumeDir), so it
	// must not change between runs.
	Name() string
	// CanSupport reports whether the plugin handles the volume. It does
	// no I/O and does not block.
	CanSupport(v *v1.Volume) bool
	// Attributes says what the manager does around SetUp for the volume.
	Attributes(v *v1.Volume) Attributes
	// SetUp makes the volume ready and returns the host path the
	// runtime mounts (the directory req.Dir, or for hostPath the path
	// on the host). It is idempotent: it is called again for a volume
	// already set up (req.Update) when Attributes.Refresh is set, and
	// after a restart of the agent for volumes found on disk. It may
	// block until ctx ends; ctx ends when the manager stops and when the
	// pod is removed (RemovePod), and SetUp must then return. An error says what is wrong with the
	// volume; the manager prefixes the pod and the volume name.
	SetUp(ctx context.Context, req *Request) (string, error)
	// TearDown undoes SetUp for the volume directory dir: it unmounts
	// what SetUp mounted and removes dir and what is beneath it. It
	// works from dir alone (after a restart the pod spec may be gone),
	// never follows a symlink out of dir, and returns nil when dir does
	// not exist.
	TearDown(ctx context.Context, dir string) error
}

// Request is one SetUp call. The plugin must not modify Pod or Volume.
type Request struct {
	// Pod is the pod the volume belongs to.
	Pod *v1.Pod
	// Volume is the volume's entry in Pod.Spec.Volumes.
	Volume *v1.Volume
	// Dir is the volume's directory on the host, VolumeDir of the pod's
	// directory, the plugin and the volume. Its parent exists; Dir itself
	// may not.
	Dir string
	// Update is set when the volume was set up before (by this process
	// or an earlier one): the plugin brings its content up to date.
	Update bool
}

// Attributes says how the manager treats a plugin's volume.
type Attributes struct {
	// Managed volumes take the pod's fsGroup: after each SetUp the
	// manager gives their files the group and group permissions, as
	// fsGroupChangePolicy says. A hostPath volume is not managed.
	Managed bool
	// ReadOnly content (configMap, secret, downwardAPI, projected) gets
	// group read, not write, from the fsGroup.
	ReadOnly bool
	// Refresh volumes follow API objects, pod fields or tokens: the
	// manager calls SetUp again (Update set) every Config.SyncPeriod
	// while the pod runs.
	Refresh bool
}

// VolumeDir is where a pod's volume lives on the host, the kubelet's
// layout: <podDir>/volumes/<plugin name, "/" written "~">/<volume name>.
func VolumeDir(podDir, plugin, volume string) string {
	return podDir + "/volumes/" + EscapePluginName(plugin) + "/" + volume
}

// EscapePluginName writes a plugin name as one path element, as the
// kubelet does: "kubernetes.io/empty-dir" becomes
// "kubernetes.io~empty-dir".
func EscapePluginName(name string) string {
	return strings.ReplaceAll(name, "/", "~")
}
