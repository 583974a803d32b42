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
	// downwardAPI and projected content. Default mount.New("").
	Mounter mount.Interface
	// Objects gives the configMaps and secrets of configMap, secret and
	// projected volumes. Nil: the configMap and secret plugins are left
	// out, and a projected volume showing a configMap or secret fails to
	// set up.
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

// DefaultPlugins returns the built-in plugins, the kubelet's in-tree
// ones nodekit has: emptyDir and hostPath, then the API-content plugins
// configMap and secret (when cfg.Objects is set), downwardAPI and
// projected. Config.Plugins defaults to DefaultPlugins(PluginConfig{Mounter:
// Config.Mounter}); an embedder appends its own plugins to the slice, or
// puts them first to take over a type. It does no I/O.
func DefaultPlugins(cfg PluginConfig) []Plugin {
	if cfg.Mounter == nil {
		cfg.Mounter = mount.New("")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	plugins := []Plugin{
		NewEmptyDir(cfg.Mounter),
		NewHostPath(),
	}
	// The constructors below fail only on a nil getter, which is checked
	// here.
	if cfg.Objects != nil {
		cm, _ := NewConfigMap(cfg.Objects, cfg.Clock)
		sec, _ := NewSecret(cfg.Objects, cfg.Mounter, cfg.Clock)
		plugins = append(plugins, cm, sec)
	}
	objects := cfg.Objects
	if objects == nil {
		objects = noObjects{}
	}
	down, _ := NewDownwardAPI(cfg.Mounter, cfg.Allocatable, cfg.Clock)
	proj, _ := NewProjected(objects, cfg.Tokens, cfg.Mounter, cfg.Allocatable, cfg.Clock)
	return append(plugins, down, proj)
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
