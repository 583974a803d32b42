// Command node is a node agent started like the kubelet: it registers the
// machine as a Node of a cluster, keeps the Node's status and Lease, runs
// the pods the API server binds to it (and the static pods of
// staticPodPath, which get mirror pods) on a CRI runtime, with the
// configMaps, secrets and service-account tokens they refer to (in env
// and volumes) read from the API server, writes
// their statuses back, sends the node's and the pods' events, and
// deletes a pod's object once a graceful deletion has stopped its
// containers:
//
//	go run ./examples/node --kubeconfig /etc/kubernetes/kubelet.conf \
//		--config /var/lib/kubelet/config.yaml --node-ip 192.0.2.10
//
// Flags, as the kubelet's:
//
//	--config                      a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1)
//	--kubeconfig                  credentials of the node (user system:node:NAME); without
//	                              it the node runs the static pods of staticPodPath only,
//	                              as the kubelet does: no Node, statuses on /pods, and
//	                              the server's webhooks off (authentication.webhook.enabled
//	                              false and authorization.mode AlwaysAllow when HTTPS)
//	--root-dir                    state directory (pods/ and the pods' allocations,
//	                              nodekit_allocation_state, under it); default /var/lib/kubelet
//	--hostname-override           the node's name; default the host name, lower-cased
//	--node-ip                     comma-separated node addresses (InternalIP)
//	--container-runtime-endpoint  the CRI socket; overrides containerRuntimeEndpoint
//	--v                           log verbosity
//
// The configuration file is decoded strictly: an unknown field, a
// duplicate field, or another apiVersion or kind is an error. Its fields
// honoured, with the kubelet's defaults when absent:
//
//	staticPodPath              static pod manifests (none)
//	fileCheckFrequency         how often staticPodPath is read (20s)
//	syncFrequency              resync of every pod (1m)
//	nodeStatusUpdateFrequency  status computation (10s)
//	nodeStatusReportFrequency  status report without change (5m, or
//	                           nodeStatusUpdateFrequency when only that is set)
//	nodeLeaseDurationSeconds   the Lease's duration (40), renewed every quarter of it
//	address, port              the node server (package server: /healthz, /pods, /metrics,
//	                           /containerLogs, /exec...) (0.0.0.0 when it serves
//	                           HTTPS, else 127.0.0.1; 10250), and the Node's daemon port
//	readOnlyPort               the kubelet's read-only server (0: none): plain
//	                           HTTP without authentication on the node server's
//	                           address, /healthz, /pods, /metrics, /metrics/probes,
//	                           /stats/summary, /metrics/resource and /metrics/cadvisor only (405 for /exec, /attach,
//	                           /portForward, /run, /containerLogs, /runningpods/)
//	tlsCertFile, tlsPrivateKeyFile  the server's certificate (with neither, a
//	                           self-signed one for the node's names, made at start)
//	authentication.x509.clientCAFile  client certificates
//	authentication.anonymous.enabled  requests without credentials (false)
//	authentication.webhook.enabled, cacheTTL  bearer tokens checked by TokenReviews
//	                           with the node's credentials, answers kept (true, 2m)
//	authorization.mode         AlwaysAllow, or Webhook (the default): a
//	                           SubjectAccessReview per request with the node's
//	                           credentials (kube.SubjectAccessReviewAuthorizer)
//	authorization.webhook.cacheAuthorizedTTL, cacheUnauthorizedTTL  (5m, 30s)
//	containerRuntimeEndpoint   the CRI socket (unix:///run/containerd/containerd.sock)
//	podLogsDir                 container logs (/var/log/pods)
//	cgroupsPerQOS, cgroupRoot, cgroupDriver  pod cgroups (true, /, cgroupfs):
//	                           each pod's cgroup at <cgroupRoot>/kubepods/[burstable/|besteffort/]pod<uid>
//	                           with the kubelet's CPU and memory settings, resized
//	                           in place with the pod (runtime/cri Config.CgroupRoot);
//	                           the systemd driver is refused
//	registerWithTaints         taints of a newly registered Node (none)
//	maxPods                    the Node's pods capacity (110)
//	systemReserved, kubeReserved  subtracted from capacity in allocatable
//	clusterDNS, clusterDomain, resolvConf  the pods' DNS (none, none,
//	                           /etc/resolv.conf; "" for none)
//	evictionHard, evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim
//	                           eviction thresholds (package eviction; evictionHard
//	                           defaults to the kubelet's), checked every 10s
//	evictionPressureTransitionPeriod, evictionMaxPodGracePeriod  (5m, 0)
//	enforceNodeAllocatable     with "pods" in it (the default), the hard
//	                           memory.available threshold also applies to
//	                           allocatableMemory.available: allocatable memory
//	                           less the pods' working sets
//	imageGCHighThresholdPercent, imageGCLowThresholdPercent, imageMinimumGCAge
//	                           unused images removed (85, 80, 2m), every 5m
//	containerLogMaxSize, containerLogMaxFiles  a running container's log is
//	                           rotated beyond the size, keeping that many files,
//	                           the older gzipped (10Mi, 5)
//	containerLogMonitorInterval, containerLogMaxWorkers  how often the logs are
//	                           checked (10s, at least 3s) and how many at once (1)
//	shutdownGracePeriod, shutdownGracePeriodCriticalPods, shutdownGracePeriodByPodPriority
//	                           graceful node shutdown on a stop signal (0, 0, none: off)
//
// Pods are admitted as the kubelet does (package admission) against the
// host's capacity less the reserved resources, maxPods and
// registerWithTaints; the eviction manager's pressure shows in the Node's
// MemoryPressure, DiskPressure and PIDPressure conditions.
//
// Every other field is accepted and ignored: healthz*,
// the other cgroup and QoS settings, other eviction and image GC fields,
// featureGates, logging, registerNode (the node always registers),
// serializeImagePulls and the rest. With a kubeconfig the server is the
// kubelet's: HTTPS, with authentication and authorization. Without one
// (static pods only) and without tlsCertFile and clientCAFile it is plain
// HTTP without authentication, on 127.0.0.1 unless address says
// otherwise. The node's identity is used as is (no certificate bootstrap or
// rotation).
//
// A runtime that is not there yet is waited for, with back-off from 100ms
// to 5s, logging "waiting for the runtime". On SIGINT, SIGTERM or SIGHUP
// it stops cleanly: the agent, the Node's status and Lease loops and the
// HTTP server stop, and it exits 0, leaving the pods running in the
// runtime, as the kubelet does. With shutdownGracePeriod (or
// shutdownGracePeriodByPodPriority) set, it first terminates every pod
// as the kubelet's graceful node shutdown does (agent.Shutdown: regular
// pods, then critical ones, each recorded Failed with reason Terminated
// and a DisruptionTarget condition; the Node reports NotReady with "node
// is shutting down"), for at most that period, then stops and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/images"
	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/server"
)

// Defaults of the command, where they differ from the packages'.
const (
	DefaultRootDir         = "/var/lib/kubelet"
	DefaultRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	DefaultAddress         = "127.0.0.1"
	KubeletDefaultAddress  = "0.0.0.0"
	DefaultPort            = 10250
)

type options struct {
	config, kubeconfig, rootDir, hostnameOverride, nodeIP, endpoint string
	verbosity                                                       int
	clock                                                           clock.WithTicker // the runtime wait's; default real
}

func main() {
	var o options
	flag.StringVar(&o.config, "config", "", "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1)")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig with the node's credentials")
	flag.StringVar(&o.rootDir, "root-dir", DefaultRootDir, "state directory")
	flag.StringVar(&o.hostnameOverride, "hostname-override", "", "the node's name (default: the host name)")
	flag.StringVar(&o.nodeIP, "node-ip", "", "comma-separated IP addresses of the node")
	flag.StringVar(&o.endpoint, "container-runtime-endpoint", "", "CRI socket (default: containerRuntimeEndpoint of --config, else "+DefaultRuntimeEndpoint+")")
	flag.IntVar(&o.verbosity, "v", 0, "log verbosity")
	flag.Parse()
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, o, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(1)
	}
}

// stopSignals are the signals that stop the command cleanly; SIGHUP (a
// closed terminal, a supervisor's hang-up) is one of them.
func stopSignals() []os.Signal { return []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} }

// signalContext is cancelled by the first of stopSignals.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), stopSignals()...)
}

// settings are the honoured fields of a KubeletConfiguration, defaulted.
type settings struct {
	staticPodPath                         string
	fileCheck, sync, statusUpdate, report time.Duration
	leaseDuration                         time.Duration
	listen                                string
	addressSet                            bool // address was configured
	port                                  int32
	readOnlyPort                          int32 // 0: no read-only server
	endpoint, podLogsDir                  string
	cgroupRoot                            string // the pods' cgroups, "" for none
	taints                                []v1.Taint
	maxPods                               int
	reserved                              v1.ResourceList
	clusterDNS                            []string
	clusterDomain, resolvConf             string
	serving                               serving
	eviction                              *agent.EvictionConfig
	imageGC                               *images.GCConfig
	logMaxSize                            int64 // bytes
	logMaxFiles, logMaxWorkers            int
	logMonitorInterval                    time.Duration
	shutdown                              agent.ShutdownConfig
}

// loadConfig reads and strictly decodes the KubeletConfiguration at path
// ("" for none) and applies the kubelet's defaults to the fields it
// honours.
func loadConfig(path string) (settings, error) {
	var kc kubeletv1beta1.KubeletConfiguration
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return settings{}, fmt.Errorf("--config: %w", err)
		}
		if err := yaml.UnmarshalStrict(data, &kc); err != nil {
			return settings{}, fmt.Errorf("--config %s: %w", path, err)
		}
		if kc.APIVersion != kubeletv1beta1.SchemeGroupVersion.String() || kc.Kind != "KubeletConfiguration" {
			return settings{}, fmt.Errorf("--config %s: apiVersion %q, kind %q; want %s, KubeletConfiguration", path, kc.APIVersion, kc.Kind, kubeletv1beta1.SchemeGroupVersion)
		}
	}
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	s := settings{
		staticPodPath: kc.StaticPodPath,
		fileCheck:     or(kc.FileCheckFrequency.Duration, 20*time.Second),
		sync:          or(kc.SyncFrequency.Duration, time.Minute),
		statusUpdate:  or(kc.NodeStatusUpdateFrequency.Duration, 10*time.Second),
		report:        or(kc.NodeStatusReportFrequency.Duration, 5*time.Minute),
		leaseDuration: 40 * time.Second,
		port:          DefaultPort,
		endpoint:      kc.ContainerRuntimeEndpoint,
		podLogsDir:    kc.PodLogsDir,
		taints:        kc.RegisterWithTaints,
		maxPods:       110,
		clusterDNS:    kc.ClusterDNS,
		clusterDomain: kc.ClusterDomain,
		resolvConf:    "/etc/resolv.conf",
	}
	// Pod cgroups, as the kubelet's cgroupsPerQOS (on by default) lays
	// them out with the cgroupfs driver, below <cgroupRoot>/kubepods.
	if kc.CgroupsPerQOS == nil || *kc.CgroupsPerQOS {
		switch kc.CgroupDriver {
		case "", "cgroupfs":
		default:
			return settings{}, fmt.Errorf("--config %s: cgroupDriver %q is not supported (cgroupfs is; or cgroupsPerQOS: false)", path, kc.CgroupDriver)
		}
		root := kc.CgroupRoot
		if root == "" {
			root = "/"
		}
		if !strings.HasPrefix(root, "/") || strings.Contains(root, "..") {
			return settings{}, fmt.Errorf("--config %s: cgroupRoot %q must be an absolute path without \"..\"", path, kc.CgroupRoot)
		}
		s.cgroupRoot = strings.TrimSuffix(root, "/") + "/kubepods"
	}
	if kc.NodeStatusUpdateFrequency.Duration > 0 && kc.NodeStatusReportFrequency.Duration == 0 {
		s.report = kc.NodeStatusUpdateFrequency.Duration // the kubelet's backward-compatible default
	}
	if kc.NodeLeaseDurationSeconds > 0 {
		s.leaseDuration = time.Duration(kc.NodeLeaseDurationSeconds) * time.Second
	}
	if kc.Port != 0 {
		if kc.Port < 0 || kc.Port > 65535 {
			return settings{}, fmt.Errorf("--config %s: port %d is not between 1 and 65535", path, kc.Port)
		}
		s.port = kc.Port
	}
	if kc.ReadOnlyPort < 0 || kc.ReadOnlyPort > 65535 {
		return settings{}, fmt.Errorf("--config %s: readOnlyPort %d is not between 0 (off) and 65535", path, kc.ReadOnlyPort)
	}
	if kc.ReadOnlyPort != 0 && kc.ReadOnlyPort == s.port {
		return settings{}, fmt.Errorf("--config %s: readOnlyPort %d is the port of the node server", path, kc.ReadOnlyPort)
	}
	s.readOnlyPort = kc.ReadOnlyPort
	address := DefaultAddress
	if kc.Address != "" {
		if net.ParseIP(kc.Address) == nil {
			return settings{}, fmt.Errorf("--config %s: address %q is not an IP address", path, kc.Address)
		}
		address = kc.Address
		s.addressSet = true
	}
	s.listen = net.JoinHostPort(address, strconv.Itoa(int(s.port)))
	if kc.MaxPods > 0 {
		s.maxPods = int(kc.MaxPods)
	}
	if s.podLogsDir == "" {
		s.podLogsDir = cri.DefaultPodLogsDir
	}
	if kc.ResolverConfig != nil {
		s.resolvConf = *kc.ResolverConfig
		if s.resolvConf == "" {
			s.resolvConf = "-" // the kubelet's "" : no resolver file
		}
	}
	reserved := v1.ResourceList{}
	for field, m := range map[string]map[string]string{"systemReserved": kc.SystemReserved, "kubeReserved": kc.KubeReserved} {
		for name, value := range m {
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return settings{}, fmt.Errorf("--config %s: %s[%s] %q: %w", path, field, name, value, err)
			}
			sum := reserved[v1.ResourceName(name)]
			sum.Add(q)
			reserved[v1.ResourceName(name)] = sum
		}
	}
	if len(reserved) > 0 {
		s.reserved = reserved
	}
	hard := kc.EvictionHard
	if hard == nil {
		hard = eviction.DefaultHard()
	}
	enforce := kc.EnforceNodeAllocatable
	if enforce == nil {
		enforce = []string{eviction.NodeAllocatableEnforcementPods} // the kubelet's default
	}
	thresholds, err := eviction.Parse(eviction.Spec{
		Hard: hard, Soft: kc.EvictionSoft, SoftGracePeriod: kc.EvictionSoftGracePeriod, MinimumReclaim: kc.EvictionMinimumReclaim,
		EnforceNodeAllocatable: enforce,
	})
	if err != nil {
		return settings{}, fmt.Errorf("--config %s: %w", path, err)
	}
	s.eviction = &agent.EvictionConfig{
		Thresholds: thresholds, PressureTransitionPeriod: kc.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriodSeconds: int64(kc.EvictionMaxPodGracePeriod),
	}
	s.imageGC = &images.GCConfig{MinAge: kc.ImageMinimumGCAge.Duration}
	if kc.ImageGCHighThresholdPercent != nil {
		s.imageGC.HighThresholdPercent = int(*kc.ImageGCHighThresholdPercent)
	}
	if kc.ImageGCLowThresholdPercent != nil {
		s.imageGC.LowThresholdPercent = int(*kc.ImageGCLowThresholdPercent)
	}
	if s.logMaxSize, s.logMaxFiles, s.logMaxWorkers, s.logMonitorInterval, err = logRotationOf(&kc, path); err != nil {
		return settings{}, err
	}
	serving, err := servingOf(&kc, path)
	if err != nil {
		return settings{}, err
	}
	s.serving = serving
	s.shutdown = shutdownOf(&kc)
	return s, nil
}

// allocatableOf is what pods are admitted against: the host's capacity
// less the reserved resources, and maxPods pods, as the Node reports.
func allocatableOf(s settings) (v1.ResourceList, error) {
	capacity, err := kube.HostResources{}.Capacity()
	if err != nil {
		return nil, err
	}
	capacity[v1.ResourcePods] = *resource.NewQuantity(int64(s.maxPods), resource.DecimalSI)
	for name, r := range s.reserved {
		if q, ok := capacity[name]; ok {
			q.Sub(r)
			if q.Sign() < 0 {
				q = resource.Quantity{}
			}
			capacity[name] = q
		}
	}
	return capacity, nil
}

// nodeIPs parses --node-ip.
func nodeIPs(flag string) ([]net.IP, []string, error) {
	var ips []net.IP
	var strs []string
	for _, f := range strings.Split(flag, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		ip := net.ParseIP(f)
		if ip == nil {
			return nil, nil, fmt.Errorf("--node-ip: %q is not an IP address", f)
		}
		ips, strs = append(ips, ip), append(strs, ip.String())
	}
	return ips, strs, nil
}

func run(ctx context.Context, o options, errOut io.Writer) error {
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	log := funcr.New(func(prefix, args string) {
		fmt.Fprintln(errOut, time.Now().Format("15:04:05.000"), prefix, args)
	}, funcr.Options{Verbosity: o.verbosity})
	s, err := loadConfig(o.config)
	if err != nil {
		return err
	}
	if o.endpoint != "" {
		s.endpoint = o.endpoint
	}
	if s.endpoint == "" {
		s.endpoint = DefaultRuntimeEndpoint
	}
	name := o.hostnameOverride
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--hostname-override is empty and the host name is unknown: %w", err)
		}
		name = h
	}
	name = strings.ToLower(strings.TrimSpace(name))
	ips, ipStrings, err := nodeIPs(o.nodeIP)
	if err != nil {
		return err
	}
	// Without a kubeconfig the node runs its static pods only, as the
	// kubelet does: no Node, no API pods, statuses served on /pods.
	var client kubernetes.Interface
	if o.kubeconfig != "" {
		restConfig, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return fmt.Errorf("--kubeconfig: %w", err)
		}
		if client, err = kubernetes.NewForConfig(restConfig); err != nil {
			return fmt.Errorf("--kubeconfig: %w", err)
		}
	} else if s.staticPodPath == "" {
		return errors.New("without --kubeconfig the node runs static pods only: the configuration needs a staticPodPath")
	}
	if !filepath.IsAbs(o.rootDir) {
		if o.rootDir, err = filepath.Abs(o.rootDir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(o.rootDir, 0o750); err != nil {
		return fmt.Errorf("--root-dir: %w", err)
	}

	rt, err := criclient.DialWait(ctx, s.endpoint, o.clock, log)
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	log.Info("runtime ready", "endpoint", s.endpoint, "runtime", rt.RuntimeName(), "version", rt.RuntimeVersion())

	srvCfg, err := s.serving.agentServer(name, ipStrings, o.clock.Now(), client)
	if err != nil {
		return err
	}
	https := srvCfg.TLS != nil
	if https && !s.addressSet {
		// Served with TLS and authentication, the node server listens
		// where the kubelet's does: on every address.
		s.listen = net.JoinHostPort(KubeletDefaultAddress, strconv.Itoa(int(s.port)))
	}
	var readOnlyListen string // on the node server's address
	if s.readOnlyPort > 0 {
		host, _, _ := net.SplitHostPort(s.listen)
		readOnlyListen = net.JoinHostPort(host, strconv.Itoa(int(s.readOnlyPort)))
	}
	cluster, err := newClusterParts(client, name, s, log)
	if err != nil {
		return err
	}
	var sources []podsource.Source
	if cluster != nil {
		sources = append(sources, cluster.podSource)
	}
	if s.staticPodPath != "" {
		file, err := podsource.NewFile(podsource.FileConfig{Dir: s.staticPodPath, NodeName: name, Period: s.fileCheck, Logger: log.WithName("file")})
		if err != nil {
			return err
		}
		if cluster != nil && cluster.mirrors != nil {
			sources = append(sources, cluster.mirrors.Source(file))
		} else {
			sources = append(sources, file)
		}
	}
	allocatable, err := allocatableOf(s)
	if err != nil {
		return err
	}
	cfg := agent.Config{
		NodeName: name, NodeIPs: ipStrings,
		Allocatable: allocatable, AllocationCheckpoint: filepath.Join(o.rootDir, "nodekit_allocation_state"),
		NodeTaints: s.taints, Eviction: s.eviction, ImageGC: s.imageGC, Shutdown: s.shutdown,
		ContainerLogMaxSize: s.logMaxSize, ContainerLogMaxFiles: s.logMaxFiles,
		ContainerLogMaxWorkers: s.logMaxWorkers, ContainerLogMonitorInterval: s.logMonitorInterval,
		RuntimeService: rt, ImageService: rt,
		CRI: cri.Config{PodLogsDir: s.podLogsDir, PodsDir: filepath.Join(o.rootDir, "pods"),
			ClusterDNS: s.clusterDNS, ClusterDomain: s.clusterDomain, ResolvConf: s.resolvConf,
			CgroupRoot: s.cgroupRoot},
		Sources:        sources,
		ResyncInterval: s.sync,
		Listen:         s.listen,
		Logger:         log.WithName("agent"), Server: srvCfg,
	}
	if cluster != nil {
		cfg.CRI.Objects, cfg.CRI.Services, cfg.Tokens = cluster.objects, cluster.services, cluster.tokens
		cfg.StatusSink, cfg.PodTerminated, cfg.Events = cluster.sink, cluster.deleter.PodTerminated, cluster.events.Event
	}
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	if readOnlyListen != "" {
		stopReadOnly, err := serveReadOnly(readOnlyListen, a.ReadOnlyHandler(), log)
		if err != nil {
			return err
		}
		defer stopReadOnly()
	}
	// With a shutdown period, a stop signal first terminates the pods.
	ctx, stopShutdown := shutdownOnStop(ctx, a, s.shutdown, log)
	defer stopShutdown()
	ctx, cancel := context.WithCancel(ctx)
	if cluster == nil {
		defer cancel()
		agentDone := make(chan error, 1)
		go func() { agentDone <- a.Run(ctx) }()
		if a.Addr() == "" {
			cancel()
			return <-agentDone // Run could not listen; its error names the address
		}
		log.Info("node agent running, static pods only", "node", name, "listen", a.Addr(), "https", https, "staticPodPath", s.staticPodPath)
		err := <-agentDone
		logStopped(log, s.shutdown)
		return err
	}
	events := cluster.events
	node, err := kube.NewNode(kube.NodeConfig{
		Client: client, Name: name, NodeIPs: ips, DaemonPort: s.port,
		Taints: s.taints, MaxPods: s.maxPods, Reserved: s.reserved,
		Runtime: rt, Health: a.NodeHealth, Events: events.Event,
		Conditions: kube.ConditionsFunc(func() kube.Pressure {
			memory, disk, pid := a.Pressure()
			return kube.Pressure{Memory: memory, Disk: disk, PID: pid}
		}),
		NodeStatusUpdateFrequency: s.statusUpdate, NodeStatusReportFrequency: s.report,
		LeaseDuration: s.leaseDuration, LeaseRenewInterval: s.leaseDuration / 4,
		Logger: log.WithName("node"),
	})
	if err != nil {
		cancel()
		return err
	}

	// The helpers (events, objects, services, mirror pods) end with ctx and return
	// nil; run returns once they have.
	var helpers sync.WaitGroup
	defer func() { cancel(); helpers.Wait() }()
	helperRuns := []func(context.Context) error{events.Run, cluster.objects.Run, cluster.services.Run}
	if cluster.mirrors != nil {
		helperRuns = append(helperRuns, cluster.mirrors.Run)
	}
	for _, r := range helperRuns {
		helpers.Add(1)
		go func() { defer helpers.Done(); _ = r(ctx) }()
	}
	agentDone, nodeDone := make(chan error, 1), make(chan error, 1)
	go func() { agentDone <- a.Run(ctx) }()
	if a.Addr() == "" {
		cancel()
		return <-agentDone // Run could not listen; its error names the address
	}
	go func() { nodeDone <- node.Run(ctx) }()
	log.Info("node agent running", "node", name, "listen", a.Addr(), "https", https, "staticPodPath", s.staticPodPath)
	// The first to end (an error, or ctx) ends the other.
	var errA, errN error
	select {
	case errA = <-agentDone:
		cancel()
		errN = <-nodeDone
	case errN = <-nodeDone:
		cancel()
		errA = <-agentDone
	}
	logStopped(log, s.shutdown)
	return errors.Join(errA, errN)
}

// serveReadOnly serves h, the read-only port's handler, over plain HTTP
// on addr until the returned stop is called; stop returns once the
// server has.
func serveReadOnly(addr string, h http.Handler, log logr.Logger) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("readOnlyPort: %w", err)
	}
	srv := server.NewHTTPServer(h, server.HTTPConfig{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "read-only server stopped", "listen", addr)
		}
	}()
	log.Info("read-only server running", "listen", lis.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
		<-done
	}, nil
}

// clusterParts are the parts of a node of a cluster, built on the node's client.
type clusterParts struct {
	mirrors   *kube.MirrorPods // nil without a staticPodPath
	podSource *kube.PodSource
	sink      *kube.StatusSink
	deleter   *kube.PodDeleter
	events    *kube.EventRecorder
	objects   *kube.Objects
	services  *kube.Services
	tokens    *kube.Tokens
}

// newClusterParts builds the API-server parts on client; nil without one.
func newClusterParts(client kubernetes.Interface, name string, s settings, log logr.Logger) (*clusterParts, error) {
	if client == nil {
		return nil, nil
	}
	p := &clusterParts{}
	var err error
	// Static pods get mirror pods in the API server, which carry their
	// statuses; the pod source hands the mirror pods to them.
	if s.staticPodPath != "" {
		if p.mirrors, err = kube.NewMirrorPods(kube.MirrorPodsConfig{Client: client, NodeName: name, Logger: log.WithName("mirror")}); err != nil {
			return nil, err
		}
	}
	if p.podSource, err = kube.NewPodSource(kube.PodSourceConfig{Client: client, NodeName: name, MirrorPods: p.mirrors, Logger: log.WithName("pods")}); err != nil {
		return nil, err
	}
	if p.sink, err = kube.NewStatusSink(kube.StatusSinkConfig{Client: client, MirrorPods: p.mirrors != nil, Logger: log.WithName("status")}); err != nil {
		return nil, err
	}
	if p.deleter, err = kube.NewPodDeleter(kube.PodDeleterConfig{Client: client, Logger: log.WithName("delete")}); err != nil {
		return nil, err
	}
	if p.events, err = kube.NewEventRecorder(kube.EventRecorderConfig{Client: client, NodeName: name, Logger: log.WithName("events")}); err != nil {
		return nil, err
	}
	if p.objects, err = kube.NewObjects(kube.ObjectsConfig{Client: client, Logger: log.WithName("objects")}); err != nil {
		return nil, err
	}
	if p.services, err = kube.NewServices(kube.ServicesConfig{Client: client, Logger: log.WithName("services")}); err != nil {
		return nil, err
	}
	if p.tokens, err = kube.NewTokens(kube.TokensConfig{Client: client}); err != nil {
		return nil, err
	}
	return p, nil
}

// logRotationOf returns containerLogMaxSize in bytes,
// containerLogMaxFiles, containerLogMaxWorkers and
// containerLogMonitorInterval, defaulted and checked as the kubelet does
// (10Mi, 5, 1, 10s; at least 2 files, 1 worker and 3s).
func logRotationOf(kc *kubeletv1beta1.KubeletConfiguration, path string) (size int64, files, workers int, interval time.Duration, err error) {
	size, files = cri.DefaultContainerLogMaxSize, cri.DefaultContainerLogMaxFiles
	workers, interval = cri.DefaultContainerLogMaxWorkers, cri.DefaultLogRotatePeriod
	fail := func(format string, args ...any) (int64, int, int, time.Duration, error) {
		return 0, 0, 0, 0, fmt.Errorf("--config %s: "+format, append([]any{path}, args...)...)
	}
	if kc.ContainerLogMaxSize != "" {
		q, err := resource.ParseQuantity(kc.ContainerLogMaxSize)
		if err != nil {
			return fail("containerLogMaxSize %q: %w", kc.ContainerLogMaxSize, err)
		}
		if q.Sign() <= 0 {
			return fail("containerLogMaxSize %q must be positive", kc.ContainerLogMaxSize)
		}
		size = q.Value()
	}
	if kc.ContainerLogMaxFiles != nil {
		if *kc.ContainerLogMaxFiles < 2 {
			return fail("containerLogMaxFiles %d must be at least 2", *kc.ContainerLogMaxFiles)
		}
		files = int(*kc.ContainerLogMaxFiles)
	}
	if kc.ContainerLogMaxWorkers != nil {
		if *kc.ContainerLogMaxWorkers < 1 {
			return fail("containerLogMaxWorkers %d must be at least 1", *kc.ContainerLogMaxWorkers)
		}
		workers = int(*kc.ContainerLogMaxWorkers)
	}
	if kc.ContainerLogMonitorInterval != nil {
		if d := kc.ContainerLogMonitorInterval.Duration; d < 3*time.Second {
			return fail("containerLogMonitorInterval %v must be at least 3s", d)
		}
		interval = kc.ContainerLogMonitorInterval.Duration
	}
	return size, files, workers, interval, nil
}

// logStopped says what a stop left behind: the pods keep running in the
// runtime, unless a graceful node shutdown terminated them.
func logStopped(log logr.Logger, c agent.ShutdownConfig) {
	if shutdownPeriod(c) > 0 {
		log.Info("stopped after the node's graceful shutdown")
		return
	}
	log.Info("stopped; pods are left running in the runtime")
}
