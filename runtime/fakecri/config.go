package fakecri

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"k8s.io/utils/clock"
)

// DefaultPodCIDR is where sandbox IPs come from by default: a loopback
// range, so traffic addressed to a fake pod can never leave the machine. A
// test can bind a listener to a pod's IP to stand in for the pod's server.
const DefaultPodCIDR = "127.88.0.0/16"

// Config configures a Runtime. The zero value is a valid configuration.
type Config struct {
	// Clock drives container timers (exits, stop delays, pull latency)
	// and timestamps. Default: the real clock.
	Clock clock.WithDelayedExecution
	// PodCIDR is the range sandbox IPs are taken from. Default
	// DefaultPodCIDR.
	PodCIDR string
	// Images are present from the start, as if pulled.
	Images []string
	// Registry, when not nil, lists the only images a pull can find;
	// pulling any other fails with NotFound. When nil, every well-formed
	// reference can be pulled.
	Registry []string
	// Network, when set, gives every sandbox off the host network a
	// real network namespace, pinned under NetNSDir, and sets it up
	// through Network instead of taking an IP from PodCIDR:
	// RunPodSandbox creates the namespace and calls SetUpSandbox;
	// StopPodSandbox (or RemovePodSandbox, when no stop succeeded)
	// calls TearDownSandbox and removes the namespace. Creating
	// namespaces needs root (CAP_SYS_ADMIN). Default: none.
	Network Network
	// NetNSDir is where sandboxes' namespaces are pinned, as
	// fakecri-<ID prefix>, when Network is set. Must be absolute.
	// Default DefaultNetNSDir.
	NetNSDir string

	podCIDR netip.Prefix
}

func (c *Config) defaults() error {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.PodCIDR == "" {
		c.PodCIDR = DefaultPodCIDR
	}
	p, err := netip.ParsePrefix(c.PodCIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
		return fmt.Errorf("fakecri: Config.PodCIDR %q: want an IPv4 prefix of /30 or wider", c.PodCIDR)
	}
	c.podCIDR = p.Masked()
	if c.Network != nil {
		if c.NetNSDir == "" {
			c.NetNSDir = DefaultNetNSDir
		}
		if !filepath.IsAbs(c.NetNSDir) {
			return fmt.Errorf("fakecri: Config.NetNSDir must be an absolute path, got %q", c.NetNSDir)
		}
	}
	return nil
}
