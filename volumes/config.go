package volumes

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/mount-utils"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// Defaults of Config.
const (
	// DefaultSyncPeriod is how often Refresh volumes are set up again,
	// the kubelet's sync frequency.
	DefaultSyncPeriod = time.Minute
	// DefaultMountTimeout bounds WaitForAttachAndMount, as the kubelet
	// bounds its wait for a pod's volumes.
	DefaultMountTimeout = 2*time.Minute + 3*time.Second
	// Back-off between failed operations on one volume: the kubelet's
	// 500ms doubling up to 2m2s.
	initialRetry = 500 * time.Millisecond
	maxRetry     = 2*time.Minute + 2*time.Second
)

// Config configures a Manager. Only PodsDir is required; every other
// zero field takes the default its doc names.
type Config struct {
	// PodsDir holds the pods' directories, <PodsDir>/<pod UID>; a
	// volume lives at VolumeDir(<PodsDir>/<pod UID>, plugin, volume).
	// It is the runtime's pods directory (runtime/cri.Config.PodsDir).
	// Must be absolute.
	PodsDir string
	// Plugins is the registry of volume types. A volume goes to the
	// first plugin whose CanSupport accepts it; names must be unique
	// and non-empty. Nil: DefaultPlugins(PluginConfig{Mounter:
	// Mounter, Clock: Clock}). An empty non-nil slice means no plugin
	// at all.
	Plugins []Plugin
	// Mounter mounts and unmounts (tmpfs emptyDirs) and tells mount
	// points apart, for the default plugins and for the removal of pod
	// directories. Default mount.New(""), the host's mount.
	Mounter mount.Interface
	// SyncPeriod is how often volumes whose Attributes.Refresh is set
	// are set up again while their pod is wanted. Default
	// DefaultSyncPeriod.
	SyncPeriod time.Duration
	// MountTimeout bounds WaitForAttachAndMount. Default
	// DefaultMountTimeout.
	MountTimeout time.Duration
	// Clock drives retries, refreshes and timeouts. Default the real
	// clock.
	Clock clock.Clock
	// Logger logs operations. Default: discard.
	Logger logr.Logger
	// Registerer receives the manager's metrics, the kubelet's:
	// volume_manager_total_volumes{plugin_name, state} and
	// storage_operation_duration_seconds{volume_plugin, operation_name,
	// status, migrated}. Nil: not registered.
	Registerer prometheus.Registerer
	// Events receives events about pods, the kubelet's: a failed SetUp
	// is a Warning FailedMount "MountVolume.SetUp failed for volume
	// "<name>" : <error>". It must not block. Default: none.
	Events runtime.EventFunc
}

func (c *Config) defaults() error {
	if c.PodsDir == "" {
		return errors.New("volumes: Config.PodsDir is required")
	}
	if !filepath.IsAbs(c.PodsDir) {
		return fmt.Errorf("volumes: Config.PodsDir must be an absolute path, got %q", c.PodsDir)
	}
	c.PodsDir = filepath.Clean(c.PodsDir)
	if c.Mounter == nil {
		c.Mounter = mount.New("")
	}
	seen := make(map[string]bool, len(c.Plugins))
	for i, p := range c.Plugins {
		if p == nil {
			return fmt.Errorf("volumes: Config.Plugins[%d] is nil", i)
		}
		name := p.Name()
		if name == "" {
			return fmt.Errorf("volumes: Config.Plugins[%d] has an empty name", i)
		}
		if seen[name] {
			return fmt.Errorf("volumes: Config.Plugins[%d]: the name %q is used twice", i, name)
		}
		seen[name] = true
	}
	if c.SyncPeriod <= 0 {
		c.SyncPeriod = DefaultSyncPeriod
	}
	if c.MountTimeout <= 0 {
		c.MountTimeout = DefaultMountTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Plugins == nil {
		c.Plugins = DefaultPlugins(PluginConfig{Mounter: c.Mounter, Clock: c.Clock})
	}
	if c.Logger.GetSink() == nil {
		c.Logger = logr.Discard()
	}
	if c.Events == nil {
		c.Events = func(*v1.Pod, string, string, string) {}
	}
	return nil
}
