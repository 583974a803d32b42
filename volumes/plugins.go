package volumes

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/mount-utils"
	"k8s.io/utils/clock"
)

// PluginConfig is what the built-in plugins need from their host.
type PluginConfig struct {
	// Mounter mounts tmpfs for Memory emptyDirs and for secret,
	// downwardAPI and projected content, and tells mount points apart
	// on teardown. Nil means the host's mounter, mount.New("") (which,
	// when called, runs umount on a temporary directory to learn how it
	// behaves); tests pass
	// mount.NewFakeMounter. See NoTmpfs for a host that may not mount.
	Mounter mount.Interface
	// NoTmpfs keeps every volume on the disk, for an agent that may not
	// mount: Mounter is then ignored and never called, secret,
	// downwardAPI and projected files are written to the volume
	// directory itself, and a Memory emptyDir fails to set up with an
	// error saying so. Default false: tmpfs through Mounter.
	NoTmpfs bool
	// Objects gives the configMaps and secrets of configMap, secret and
	// projected volumes. Nil: NewConfigMap and NewSecret fail,
	// DefaultPlugins leaves those two plugins out, and a projected
	// volume showing a configMap or secret fails to set up.
	Objects ObjectGetter
	// Tokens gives projected service-account tokens. Nil: a projected
	// volume asking for one fails to set up.
	Tokens TokenGetter
	// Allocatable is the node's allocatable resources, which a
	// resourceFieldRef shows for a container without that limit, as the
	// kubelet does. Nil: such a field shows 0.
	Allocatable v1.ResourceList
	// Clock names the generations of content volumes and times token
	// refreshes. Default: the real clock.
	Clock clock.PassiveClock
}

// mounter is the mounter the plugins use: nil when NoTmpfs is set,
// else Mounter, else the host's.
func (c PluginConfig) mounter() mount.Interface {
	switch {
	case c.NoTmpfs:
		return nil
	case c.Mounter != nil:
		return c.Mounter
	}
	return mount.New("")
}

// clock is Clock, else the real clock.
func (c PluginConfig) clock() clock.PassiveClock {
	if c.Clock == nil {
		return clock.RealClock{}
	}
	return c.Clock
}

// DefaultPlugins returns the built-in plugins, the kubelet's in-tree
// ones nodekit has: emptyDir and hostPath, then the API-content plugins
// configMap and secret (when cfg.Objects is set), downwardAPI and
// projected. Config.Plugins defaults to DefaultPlugins(PluginConfig{Mounter:
// Config.Mounter}); an embedder appends its own plugins to the slice, or
// puts them first to take over a type. Each plugin is the one its
// constructor (NewEmptyDir, NewHostPath...) returns for cfg. It does no
// I/O beyond mount.New's probe when cfg.Mounter is nil and NoTmpfs is
// not set, done once for all the plugins.
func DefaultPlugins(cfg PluginConfig) []Plugin {
	cfg.Mounter = cfg.mounter()
	cfg.Clock = cfg.clock()
	plugins := []Plugin{
		NewEmptyDir(cfg),
		NewHostPath(),
	}
	// NewConfigMap and NewSecret fail only on a nil Objects, which is
	// checked here.
	if cfg.Objects != nil {
		cm, _ := NewConfigMap(cfg)
		sec, _ := NewSecret(cfg)
		plugins = append(plugins, cm, sec)
	}
	return append(plugins, NewDownwardAPI(cfg), NewProjected(cfg))
}

// noObjects is the ObjectGetter of a host that gave none.
type noObjects struct{}

var errNoObjects = errors.New("no ObjectGetter is configured to read configMaps and secrets from")

func (noObjects) GetConfigMap(context.Context, string, string) (*v1.ConfigMap, error) {
	return nil, errNoObjects
}

func (noObjects) GetSecret(context.Context, string, string) (*v1.Secret, error) {
	return nil, errNoObjects
}
