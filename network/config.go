package network

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// Defaults of Config.
const (
	// DefaultConfDir is where CNI network configurations are read from,
	// the directory containerd, CRI-O and the kubelet's old dockershim
	// use.
	DefaultConfDir = "/etc/cni/net.d"
	// DefaultCacheDir is libcni's cache directory: ADD results and the
	// configuration they were made with, read again by CHECK and DEL.
	DefaultCacheDir = "/var/lib/cni"
	// DefaultIfName is the pod's interface name.
	DefaultIfName = "eth0"
	// DefaultTimeout bounds one SetUp, Check or TearDown (every plugin
	// of the list together), the kubelet's default runtime request
	// timeout, which bounds a sandbox's creation and so its CNI ADD.
	DefaultTimeout = 2 * time.Minute
	// killWait is how long a killed plugin's output pipes may stay open
	// (held by a child that left its process group) before the wait for
	// them is given up.
	killWait = 2 * time.Second
)

// DefaultBinDirs are the plugin directories searched when
// Config.BinDirs is empty: the usual one, then Debian's
// (containernetworking-plugins installs into /usr/lib/cni).
func DefaultBinDirs() []string { return []string{"/opt/cni/bin", "/usr/lib/cni"} }

// Config configures a CNI. Every zero field takes the default its doc
// names.
type Config struct {
	// ConfDir holds the network configurations (*.conflist, *.conf,
	// *.json). The first usable one in lexical order of file names is
	// used, as containerd and CRI-O do. Must be absolute. Default
	// DefaultConfDir.
	ConfDir string
	// BinDirs are searched in order for the plugin binaries. Each must
	// be absolute. Default DefaultBinDirs().
	BinDirs []string
	// CacheDir is libcni's cache: the result and configuration of each
	// ADD, so that CHECK and DEL use the configuration the pod was set
	// up with, also after a restart and after the configuration
	// directory changed. Must be absolute. Default DefaultCacheDir.
	CacheDir string
	// IfName is the name of the pod's interface inside its network
	// namespace. Default DefaultIfName.
	IfName string
	// Timeout bounds each SetUp, Check and TearDown on top of the
	// caller's context: a plugin still running then is killed with its
	// process group. Default DefaultTimeout.
	Timeout time.Duration
	// Loopback, when set, also brings the sandbox's loopback interface
	// up with the "loopback" plugin before the configured list runs, as
	// the kubelet's CNI network plugin did for every pod; the plugin
	// must then be in BinDirs. Leave it unset when the runtime brings lo
	// up itself or the list includes the loopback plugin.
	Loopback bool
	// Clock times operations for the metrics. Default the real clock.
	Clock clock.PassiveClock
	// Registerer receives the metrics, the kubelet's network plugin
	// ones: kubelet_network_plugin_operations_duration_seconds,
	// kubelet_network_plugin_operations_total and
	// kubelet_network_plugin_operations_errors_total, each by
	// operation_type (set_up_pod, tear_down_pod, check_pod). Nil: not
	// registered.
	Registerer prometheus.Registerer
	// Logger logs set-ups and tear-downs. Default: discard.
	Logger logr.Logger
	// Exec runs the plugins. Default: plugins run as processes in their
	// own process group, killed as a group when the context ends.
	Exec invoke.Exec
}

func (c *Config) defaults() error {
	if c.ConfDir == "" {
		c.ConfDir = DefaultConfDir
	}
	if !filepath.IsAbs(c.ConfDir) {
		return fmt.Errorf("network: Config.ConfDir must be an absolute path, got %q", c.ConfDir)
	}
	if len(c.BinDirs) == 0 {
		c.BinDirs = DefaultBinDirs()
	} else {
		c.BinDirs = append([]string(nil), c.BinDirs...)
	}
	for i, d := range c.BinDirs {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("network: Config.BinDirs[%d] must be an absolute path, got %q", i, d)
		}
	}
	if c.CacheDir == "" {
		c.CacheDir = DefaultCacheDir
	}
	if !filepath.IsAbs(c.CacheDir) {
		return fmt.Errorf("network: Config.CacheDir must be an absolute path, got %q", c.CacheDir)
	}
	if c.IfName == "" {
		c.IfName = DefaultIfName
	}
	if len(c.IfName) > 15 {
		return fmt.Errorf("network: Config.IfName %q is longer than 15 bytes", c.IfName)
	}
	if c.Timeout < 0 {
		return errors.New("network: Config.Timeout must not be negative")
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger.GetSink() == nil {
		c.Logger = logr.Discard()
	}
	if c.Exec == nil {
		c.Exec = &pluginExec{}
	}
	return nil
}
