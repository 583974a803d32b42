package volumes

import (
	"k8s.io/mount-utils"
)

// PluginConfig is what the built-in plugins need from their host.
type PluginConfig struct {
	// Mounter mounts tmpfs for Memory emptyDirs. Default mount.New("").
	Mounter mount.Interface
	// Objects gives the configMaps and secrets of configMap, secret and
	// projected volumes. Nil: those plugins are left out.
	Objects ObjectGetter
	// Tokens gives projected service-account tokens. Nil: a projected
	// volume asking for one fails to set up.
	Tokens TokenGetter
}

// DefaultPlugins returns the built-in plugins, the kubelet's in-tree
// ones nodekit has: emptyDir and hostPath, then the API-content plugins
// (configMap, secret, downwardAPI, projected). Config.Plugins defaults to
// DefaultPlugins(PluginConfig{Mounter: Config.Mounter}); an embedder
// appends its own plugins to the slice, or puts them first to take over
// a type. It does no I/O.
func DefaultPlugins(cfg PluginConfig) []Plugin {
	if cfg.Mounter == nil {
		cfg.Mounter = mount.New("")
	}
	plugins := []Plugin{
		NewEmptyDir(cfg.Mounter),
		NewHostPath(),
	}
	// The API-content plugins (configMap, secret, downwardAPI, projected)
	// are listed here, after the local ones.
	return plugins
}
