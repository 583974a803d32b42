package network

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// Network sets up and tears down pods' networks. A runtime that leaves
// pod networking to the node agent calls SetUp once it has created a
// sandbox's network namespace and TearDown before it removes it.
type Network interface {
	// SetUp attaches the network namespace at netnsPath to the pod
	// network and returns the pod's IPs. It blocks while the plugins
	// run, at most until ctx ends. Safe for concurrent use for
	// different sandboxes. Errors name the pod, the configuration and
	// the plugin; ErrNoConfig when no configuration is usable.
	SetUp(ctx context.Context, pod PodRef, netnsPath string, opts Options) (IPs, error)
	// TearDown detaches the sandbox from the pod network and releases
	// what SetUp took (addresses, host ports). netnsPath may be empty
	// when the namespace is already gone. Tearing down a sandbox that
	// was never set up, or twice, succeeds. Blocks like SetUp.
	TearDown(ctx context.Context, pod PodRef, netnsPath string, opts Options) error
}

// Checker is implemented by a Network that can verify a sandbox's
// network is still as SetUp left it (CNI CHECK).
type Checker interface {
	// Check returns an error when the sandbox's network is not as set
	// up. Blocks like SetUp.
	Check(ctx context.Context, pod PodRef, netnsPath string, opts Options) error
}

// PodRef names the pod and sandbox an operation is for. They reach the
// plugins as CNI_CONTAINERID and CNI_ARGS (K8S_POD_NAMESPACE,
// K8S_POD_NAME, K8S_POD_UID, K8S_POD_INFRA_CONTAINER_ID).
type PodRef struct {
	Namespace string
	Name      string
	UID       string
	// SandboxID is the sandbox's ID, the CNI container ID. Required.
	SandboxID string
}

// String returns namespace/name, the key logs and errors use.
func (p PodRef) String() string { return p.Namespace + "/" + p.Name }

// Options are the runtime configuration a pod asks of the network,
// passed to the plugins that declare the matching capability.
type Options struct {
	// PortMappings are the pod's host ports ("portMappings").
	PortMappings []PortMapping
	// Bandwidth limits the pod's traffic ("bandwidth").
	Bandwidth *Bandwidth
	// IPRanges are the ranges to allocate from, one set per address
	// family ("ipRanges").
	IPRanges [][]IPRange
	// DNS is the pod's resolver configuration ("dns").
	DNS *DNS
	// Args are extra CNI_ARGS key/value pairs.
	Args map[string]string
}

// PortMapping forwards a host port to a port of the pod.
type PortMapping struct {
	HostPort      int32
	ContainerPort int32
	// Protocol is TCP, UDP or SCTP (any case). Default TCP.
	Protocol string
	// HostIP restricts the mapping to one host address. Default all.
	HostIP string
}

// Bandwidth limits a pod's traffic, in bits per second and bits.
type Bandwidth struct {
	IngressRate, IngressBurst uint64
	EgressRate, EgressBurst   uint64
}

// IPRange is one range to allocate pod addresses from.
type IPRange struct {
	Subnet     string
	RangeStart string
	RangeEnd   string
	Gateway    string
}

// DNS is a resolver configuration.
type DNS struct {
	Servers  []string
	Searches []string
	Options  []string
}

// IPs are a pod's addresses, in the order the plugins reported them;
// the first is the primary one.
type IPs []netip.Addr

// V4 returns the first IPv4 address, and whether there is one.
func (ips IPs) V4() (netip.Addr, bool) {
	for _, ip := range ips {
		if ip.Is4() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// V6 returns the first IPv6 address, and whether there is one.
func (ips IPs) V6() (netip.Addr, bool) {
	for _, ip := range ips {
		if ip.Is6() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// CNI is a Network that runs CNI plugins through libcni with the first
// usable configuration of a directory, loaded again before every
// operation (parsed files are cached while they are unchanged, so a new
// or edited file is seen without a watch). It is safe for concurrent
// use and starts no goroutine.
type CNI struct {
	cfg    Config
	cni    *libcni.CNIConfig
	loader loader
	lo     *libcni.NetworkConfigList // nil unless Config.Loopback
	mx     *metrics
}

// loopbackConf is the list that brings a sandbox's lo up.
const loopbackConf = `{"cniVersion": "1.0.0", "name": "cni-loopback", "plugins": [{"type": "loopback"}]}`

var (
	_ Network = (*CNI)(nil)
	_ Checker = (*CNI)(nil)
)

// New returns a CNI with cfg's defaults filled in. It does no I/O: a
// missing directory or plugin shows in Status and in each operation.
func New(cfg Config) (*CNI, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	mx, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("network: registering metrics: %w", err)
	}
	c := &CNI{
		cfg: cfg,
		cni: libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, cfg.Exec),
		mx:  mx,
	}
	if cfg.Loopback {
		lo, err := libcni.NetworkConfFromBytes([]byte(loopbackConf))
		if err != nil {
			return nil, fmt.Errorf("network: the loopback configuration: %w", err)
		}
		c.lo = lo
	}
	return c, nil
}

// Conf returns the configuration the next SetUp would use, or an error
// matching ErrNoConfig that names every file and why it is not usable.
// Safe for concurrent use; reads the configuration directory.
func (c *CNI) Conf() (*Conf, error) {
	return c.loader.load(c.cfg.ConfDir, c.cfg.BinDirs, c.cfg.Exec.FindInPath)
}

// Status returns nil when a usable configuration is there, the error of
// Conf otherwise: the runtime's NetworkReady condition.
func (c *CNI) Status() error {
	_, err := c.Conf()
	return err
}

// SetUp runs ADD of every plugin of the configuration for the sandbox.
// When ADD fails, what the plugins already did is undone with DEL
// (bounded by Config.Timeout, also when ctx has ended) and the ADD error
// is returned.
func (c *CNI) SetUp(ctx context.Context, pod PodRef, netnsPath string, opts Options) (ips IPs, err error) {
	defer c.observe(opSetUp, c.cfg.Clock.Now(), &err)
	return c.setUp(ctx, pod, netnsPath, opts)
}

func (c *CNI) setUp(ctx context.Context, pod PodRef, netnsPath string, opts Options) (IPs, error) {
	if err := validate(pod, netnsPath, true); err != nil {
		return nil, err
	}
	conf, err := c.Conf()
	if err != nil {
		return nil, fmt.Errorf("network: set up pod %q: %w", pod, err)
	}
	rt, err := c.runtimeConf(pod, netnsPath, opts)
	if err != nil {
		return nil, err
	}
	log := c.cfg.Logger.WithValues("pod", pod.String(), "podUID", pod.UID, "sandboxID", pod.SandboxID, "network", conf.Name)
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if c.lo != nil {
		lrt := *rt
		lrt.IfName = "lo"
		if _, err := c.cni.AddNetworkList(actx, c.lo, &lrt); err != nil {
			return nil, fmt.Errorf("network: set up pod %q (sandbox %s): bringing lo up: %w", pod, pod.SandboxID, err)
		}
	}
	res, err := c.cni.AddNetworkList(actx, conf.list, rt)
	if err != nil {
		err = fmt.Errorf("network: set up pod %q (sandbox %s) on network %q of %s: %w", pod, pod.SandboxID, conf.Name, conf.File, err)
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
		defer dcancel()
		if derr := c.cni.DelNetworkList(dctx, conf.list, rt); derr != nil {
			err = errors.Join(err, fmt.Errorf("network: undo the failed set-up of pod %q: %w", pod, derr))
		}
		if c.lo != nil {
			lrt := *rt
			lrt.IfName = "lo"
			_ = c.cni.DelNetworkList(dctx, c.lo, &lrt) // only drops its cache entry
		}
		return nil, err
	}
	ips, err := podIPs(res)
	if err != nil {
		return nil, fmt.Errorf("network: set up pod %q on network %q of %s: %w", pod, conf.Name, conf.File, err)
	}
	log.V(2).Info("pod network set up", "ips", ips)
	return ips, nil
}

// Check runs CHECK of every plugin with the configuration the sandbox
// was set up with (from the cache), or the current one when the cache
// has none.
func (c *CNI) Check(ctx context.Context, pod PodRef, netnsPath string, opts Options) (err error) {
	defer c.observe(opCheck, c.cfg.Clock.Now(), &err)
	return c.check(ctx, pod, netnsPath, opts)
}

func (c *CNI) check(ctx context.Context, pod PodRef, netnsPath string, opts Options) error {
	if err := validate(pod, netnsPath, true); err != nil {
		return err
	}
	list, rt, from, err := c.setUpWith(pod, netnsPath, opts)
	if err != nil {
		return fmt.Errorf("network: check pod %q: %w", pod, err)
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if err := c.cni.CheckNetworkList(cctx, list, rt); err != nil {
		return fmt.Errorf("network: check pod %q (sandbox %s) on network %q of %s: %w", pod, pod.SandboxID, list.Name, from, err)
	}
	return nil
}

// TearDown runs DEL of every plugin, last first, with the configuration
// and runtime options the sandbox was set up with, read from the cache
// (so a restart or a changed configuration directory does not change
// what is torn down). Without a cached set-up it uses the current
// configuration and opts, and without either there is nothing to
// release and it returns nil.
func (c *CNI) TearDown(ctx context.Context, pod PodRef, netnsPath string, opts Options) (err error) {
	defer c.observe(opTearDown, c.cfg.Clock.Now(), &err)
	return c.tearDown(ctx, pod, netnsPath, opts)
}

func (c *CNI) tearDown(ctx context.Context, pod PodRef, netnsPath string, opts Options) error {
	if err := validate(pod, netnsPath, false); err != nil {
		return err
	}
	list, rt, from, err := c.setUpWith(pod, netnsPath, opts)
	if errors.Is(err, ErrNoConfig) {
		// Neither a cached set-up nor a configuration: nothing this
		// network knows of to release.
		c.cfg.Logger.Info("no network configuration to tear down pod with", "pod", pod.String(), "sandboxID", pod.SandboxID, "reason", err.Error())
		return nil
	}
	if err != nil {
		return fmt.Errorf("network: tear down pod %q: %w", pod, err)
	}
	dctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if err := c.cni.DelNetworkList(dctx, list, rt); err != nil {
		return fmt.Errorf("network: tear down pod %q (sandbox %s) on network %q of %s: %w", pod, pod.SandboxID, list.Name, from, err)
	}
	if c.lo != nil {
		// Only drops the cache entry: lo goes with the namespace.
		lrt := *rt
		lrt.IfName = "lo"
		if err := c.cni.DelNetworkList(dctx, c.lo, &lrt); err != nil {
			return fmt.Errorf("network: tear down pod %q (sandbox %s): loopback: %w", pod, pod.SandboxID, err)
		}
	}
	c.cfg.Logger.V(2).Info("pod network torn down", "pod", pod.String(), "podUID", pod.UID, "sandboxID", pod.SandboxID, "network", list.Name)
	return nil
}

func (c *CNI) observe(op string, start time.Time, err *error) {
	c.mx.observe(op, *err, c.cfg.Clock.Since(start))
}

// setUpWith returns the configuration list and runtime configuration
// the sandbox was set up with according to the cache, and where the
// list came from; the current ones when the cache has none.
func (c *CNI) setUpWith(pod PodRef, netnsPath string, opts Options) (*libcni.NetworkConfigList, *libcni.RuntimeConf, string, error) {
	atts, err := c.cni.GetCachedAttachments(pod.SandboxID)
	if err != nil {
		return nil, nil, "", fmt.Errorf("reading the cache in %s: %w", c.cfg.CacheDir, err)
	}
	for _, a := range atts {
		if a.IfName != c.cfg.IfName || len(a.Config) == 0 {
			continue
		}
		list, err := libcni.NetworkConfFromBytes(a.Config)
		if err != nil || len(list.Plugins) == 0 {
			continue // an unreadable entry: fall back to the current configuration
		}
		rt := &libcni.RuntimeConf{
			ContainerID:    pod.SandboxID,
			NetNS:          netnsPath,
			IfName:         c.cfg.IfName,
			Args:           a.CniArgs,
			CapabilityArgs: a.CapabilityArgs,
		}
		if rt.NetNS == "" {
			rt.NetNS = a.NetNS
		}
		return list, rt, "the cache in " + c.cfg.CacheDir, nil
	}
	conf, err := c.Conf()
	if err != nil {
		return nil, nil, "", err
	}
	rt, err := c.runtimeConf(pod, netnsPath, opts)
	if err != nil {
		return nil, nil, "", err
	}
	return conf.list, rt, conf.File, nil
}

func validate(pod PodRef, netnsPath string, needNetns bool) error {
	switch {
	case pod.SandboxID == "":
		return fmt.Errorf("network: pod %q: PodRef.SandboxID is required", pod)
	case strings.ContainsAny(pod.SandboxID, "/\x00"):
		return fmt.Errorf("network: pod %q: PodRef.SandboxID %q must not contain '/'", pod, pod.SandboxID)
	case needNetns && netnsPath == "":
		return fmt.Errorf("network: pod %q (sandbox %s): the network namespace path is required", pod, pod.SandboxID)
	case netnsPath != "" && !filepath.IsAbs(netnsPath):
		return fmt.Errorf("network: pod %q (sandbox %s): the network namespace path %q is not absolute", pod, pod.SandboxID, netnsPath)
	}
	return nil
}

func (c *CNI) runtimeConf(pod PodRef, netnsPath string, opts Options) (*libcni.RuntimeConf, error) {
	args := [][2]string{
		{"IgnoreUnknown", "1"},
		{"K8S_POD_NAMESPACE", pod.Namespace},
		{"K8S_POD_NAME", pod.Name},
		{"K8S_POD_INFRA_CONTAINER_ID", pod.SandboxID},
		{"K8S_POD_UID", pod.UID},
	}
	for k, v := range opts.Args {
		if k == "" || strings.ContainsAny(k, "=;") || strings.Contains(v, ";") {
			return nil, fmt.Errorf("network: pod %q: Options.Args[%q]: keys and values must not contain ';' (and keys no '=')", pod, k)
		}
		args = append(args, [2]string{k, v})
	}
	caps := map[string]any{}
	if len(opts.PortMappings) > 0 {
		pms := make([]map[string]any, 0, len(opts.PortMappings))
		for i, pm := range opts.PortMappings {
			proto := strings.ToLower(pm.Protocol)
			if proto == "" {
				proto = "tcp"
			}
			if proto != "tcp" && proto != "udp" && proto != "sctp" {
				return nil, fmt.Errorf("network: pod %q: Options.PortMappings[%d].Protocol %q is not TCP, UDP or SCTP", pod, i, pm.Protocol)
			}
			if pm.HostPort <= 0 || pm.HostPort > 65535 || pm.ContainerPort <= 0 || pm.ContainerPort > 65535 {
				return nil, fmt.Errorf("network: pod %q: Options.PortMappings[%d]: ports must be in 1-65535, got host %d, container %d", pod, i, pm.HostPort, pm.ContainerPort)
			}
			m := map[string]any{"hostPort": pm.HostPort, "containerPort": pm.ContainerPort, "protocol": proto}
			if pm.HostIP != "" {
				if _, err := netip.ParseAddr(pm.HostIP); err != nil {
					return nil, fmt.Errorf("network: pod %q: Options.PortMappings[%d].HostIP: %w", pod, i, err)
				}
				m["hostIP"] = pm.HostIP
			}
			pms = append(pms, m)
		}
		caps["portMappings"] = pms
	}
	if b := opts.Bandwidth; b != nil {
		caps["bandwidth"] = map[string]any{
			"ingressRate": b.IngressRate, "ingressBurst": b.IngressBurst,
			"egressRate": b.EgressRate, "egressBurst": b.EgressBurst,
		}
	}
	if len(opts.IPRanges) > 0 {
		sets := make([][]map[string]any, 0, len(opts.IPRanges))
		for i, set := range opts.IPRanges {
			rs := make([]map[string]any, 0, len(set))
			for j, r := range set {
				if _, err := netip.ParsePrefix(r.Subnet); err != nil {
					return nil, fmt.Errorf("network: pod %q: Options.IPRanges[%d][%d].Subnet: %w", pod, i, j, err)
				}
				m := map[string]any{"subnet": r.Subnet}
				for k, v := range map[string]string{"rangeStart": r.RangeStart, "rangeEnd": r.RangeEnd, "gateway": r.Gateway} {
					if v != "" {
						m[k] = v
					}
				}
				rs = append(rs, m)
			}
			sets = append(sets, rs)
		}
		caps["ipRanges"] = sets
	}
	if d := opts.DNS; d != nil {
		caps["dns"] = map[string]any{"servers": d.Servers, "searches": d.Searches, "options": d.Options}
	}
	return &libcni.RuntimeConf{
		ContainerID:    pod.SandboxID,
		NetNS:          netnsPath,
		IfName:         c.cfg.IfName,
		Args:           args,
		CapabilityArgs: caps,
	}, nil
}

// podIPs returns the addresses of res on interfaces inside the sandbox
// (or on no named interface), leaving out those of host-side
// interfaces such as a bridge.
func podIPs(res types.Result) (IPs, error) {
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("converting the plugins' result: %w", err)
	}
	var ips IPs
	for _, ipc := range r.IPs {
		if ipc.Interface != nil {
			i := *ipc.Interface
			if i >= 0 && i < len(r.Interfaces) && r.Interfaces[i].Sandbox == "" {
				continue
			}
		}
		a, ok := netip.AddrFromSlice(ipc.Address.IP)
		if !ok {
			continue
		}
		ips = append(ips, a.Unmap())
	}
	return ips, nil
}
