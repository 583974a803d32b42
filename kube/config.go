package kube

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/inplacepodresize"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/restartallcontainers"
	criapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"

	nkruntime "github.com/nodekit/nodekit/runtime"
)

// DefaultKubeletVersion is the version a Node reports in
// status.nodeInfo.kubeletVersion unless NodeConfig.KubeletVersion says
// otherwise: the Kubernetes release whose kubelet nodekit follows, marked
// as nodekit's.
const DefaultKubeletVersion = "v1.37.2-nodekit"

// The defaults of NodeConfig, the kubelet's.
const (
	DefaultMaxPods                   = 110
	DefaultDaemonPort                = 10250
	DefaultNodeStatusUpdateFrequency = 10 * time.Second
	DefaultNodeStatusReportFrequency = 5 * time.Minute
	DefaultLeaseDuration             = 40 * time.Second
	DefaultLeaseRenewInterval        = 10 * time.Second
	DefaultRequestTimeout            = 10 * time.Second
)

// NodeConfig configures a Node. The zero value of each field means the
// default its doc names; Client and Name are required.
type NodeConfig struct {
	// Client talks to the API server. It may authenticate as the node
	// (system:node:NAME in group system:nodes): everything Node does is
	// allowed to that identity by the Node authorizer and NodeRestriction.
	Client kubernetes.Interface
	// Name is the Node's name (a DNS subdomain). Required.
	Name string
	// Hostname is the kubernetes.io/hostname label and the Hostname
	// address. Default: Name.
	Hostname string

	// Labels are set on the Node at registration, and merged into an
	// existing Node when it is adopted (these win; other labels stay).
	// kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch are
	// always set. NodeRestriction refuses labels a node may not set.
	Labels map[string]string
	// Taints are the Node's taints when Node creates it (the kubelet's
	// registerWithTaints). An adopted Node's taints are left alone: an
	// administrator may have removed them.
	Taints []v1.Taint
	// NodeIPs are reported as InternalIP addresses, in order. Default: none
	// (only the Hostname address is reported).
	NodeIPs []net.IP
	// DaemonPort is status.daemonEndpoints.kubeletEndpoint.port, where the
	// node's server listens. Default 10250.
	DaemonPort int32

	// KubeletVersion is status.nodeInfo.kubeletVersion. Default
	// DefaultKubeletVersion.
	KubeletVersion string
	// Runtime, when set, gives status.nodeInfo.containerRuntimeVersion
	// ("NAME://VERSION") from the CRI Version call. Both
	// runtime/criclient.Client and runtime/fakecri implement it.
	Runtime criapi.RuntimeVersioner
	// SystemInfo returns the rest of status.nodeInfo (kernel, OS image,
	// boot ID, machine ID, system UUID, OS, architecture). Default:
	// HostSystemInfo.
	SystemInfo func() (v1.NodeSystemInfo, error)

	// Resources gives the node's capacity. Default: HostResources{RootDir: "/"}.
	Resources ResourceProvider
	// MaxPods is the pods capacity, unless Resources reports one.
	// Default 110.
	MaxPods int
	// Reserved is subtracted from capacity to give allocatable (the
	// kubelet's kube-reserved, system-reserved and hard eviction
	// thresholds added together). A resource never goes below zero.
	Reserved v1.ResourceList

	// DeclaredFeatures are status.declaredFeatures: which of the features
	// the kubelet declares (k8s.io/component-helpers/nodedeclaredfeatures)
	// this node supports. The scheduler puts a pod that needs one only on
	// a node that declares it: a pod with a restart rule whose action is
	// RestartAllContainers only goes to a node that declares
	// RestartAllContainersOnContainerExits. Reported sorted, without
	// duplicates. Default (nil): DefaultDeclaredFeatures(), those nodekit
	// implements; an empty, non-nil slice declares none (for a runtime of
	// your own that does not implement them).
	DeclaredFeatures []string

	// Health decides the Ready condition: nil means Ready, an error means
	// NotReady with the error as message. Give the agent's Healthy (runtime
	// ready and PLEG current). Default: always healthy.
	Health func() error
	// Conditions gives the pressure conditions. Default: no pressure.
	Conditions ConditionsProvider

	// NodeStatusUpdateFrequency is how often the status is computed and
	// compared with the Node's. Default 10s.
	NodeStatusUpdateFrequency time.Duration
	// NodeStatusReportFrequency is how long an unchanged status goes
	// without being patched. Default 5m.
	NodeStatusReportFrequency time.Duration
	// LeaseDuration is the Lease's spec.leaseDurationSeconds (whole seconds).
	// Default 40s.
	LeaseDuration time.Duration
	// LeaseRenewInterval is how often the Lease is renewed. Default 10s.
	LeaseRenewInterval time.Duration
	// RequestTimeout bounds each call to the API server. Default 10s.
	RequestTimeout time.Duration

	// Events receives the Node's events, with pod nil (the Node is the
	// involved object): Starting when Run begins, RegisteredNode when it
	// created the Node, and NodeReady or NodeNotReady when the Ready
	// condition it wrote changed. Give an EventRecorder's Event. It must
	// not block. Default: none.
	Events nkruntime.EventFunc

	// Clock drives every period and back-off. Default: the real clock.
	Clock clock.WithTicker
	// Logger receives the Node's logs. Default: discarded.
	Logger logr.Logger
}

func (c NodeConfig) withDefaults() (NodeConfig, error) {
	if c.Client == nil {
		return c, errors.New("kube: NodeConfig.Client is required")
	}
	if c.Name == "" {
		return c, errors.New("kube: NodeConfig.Name is required")
	}
	if errs := validation.IsDNS1123Subdomain(c.Name); len(errs) > 0 {
		return c, fmt.Errorf("kube: NodeConfig.Name %q: %v", c.Name, errs)
	}
	if c.Hostname == "" {
		c.Hostname = c.Name
	}
	if c.DaemonPort == 0 {
		c.DaemonPort = DefaultDaemonPort
	}
	if c.DaemonPort < 0 || c.DaemonPort > 65535 {
		return c, fmt.Errorf("kube: NodeConfig.DaemonPort %d is not a port", c.DaemonPort)
	}
	if c.KubeletVersion == "" {
		c.KubeletVersion = DefaultKubeletVersion
	}
	if c.SystemInfo == nil {
		c.SystemInfo = HostSystemInfo
	}
	if c.Resources == nil {
		c.Resources = HostResources{RootDir: "/"}
	}
	if c.MaxPods == 0 {
		c.MaxPods = DefaultMaxPods
	}
	if c.MaxPods < 0 {
		return c, fmt.Errorf("kube: NodeConfig.MaxPods %d is negative", c.MaxPods)
	}
	if c.Health == nil {
		c.Health = func() error { return nil }
	}
	if c.Conditions == nil {
		c.Conditions = NoPressure{}
	}
	durations := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"NodeStatusUpdateFrequency", &c.NodeStatusUpdateFrequency, DefaultNodeStatusUpdateFrequency},
		{"NodeStatusReportFrequency", &c.NodeStatusReportFrequency, DefaultNodeStatusReportFrequency},
		{"LeaseDuration", &c.LeaseDuration, DefaultLeaseDuration},
		{"LeaseRenewInterval", &c.LeaseRenewInterval, DefaultLeaseRenewInterval},
		{"RequestTimeout", &c.RequestTimeout, DefaultRequestTimeout},
	}
	for _, d := range durations {
		if err := defaultDuration("NodeConfig", d.name, d.d, d.def); err != nil {
			return c, err
		}
	}
	if c.LeaseDuration < time.Second {
		return c, fmt.Errorf("kube: NodeConfig.LeaseDuration %v is under a second", c.LeaseDuration)
	}
	if c.LeaseRenewInterval >= c.LeaseDuration {
		return c, fmt.Errorf("kube: NodeConfig.LeaseRenewInterval %v is not shorter than LeaseDuration %v", c.LeaseRenewInterval, c.LeaseDuration)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger.GetSink() == nil {
		c.Logger = logr.Discard()
	}
	if c.Events == nil {
		c.Events = func(*v1.Pod, string, string, string) {}
	}
	c.Labels = copyMap(c.Labels)
	c.Taints = append([]v1.Taint(nil), c.Taints...)
	c.NodeIPs = append([]net.IP(nil), c.NodeIPs...)
	c.Reserved = c.Reserved.DeepCopy()
	if c.DeclaredFeatures == nil {
		c.DeclaredFeatures = DefaultDeclaredFeatures()
	}
	c.DeclaredFeatures = slices.Compact(slices.Sorted(slices.Values(c.DeclaredFeatures)))
	return c, nil
}

// DefaultDeclaredFeatures returns the node-declared features nodekit
// implements, the default of NodeConfig.DeclaredFeatures: the restart of
// all containers by a restart rule (RestartAllContainersOnContainerExits),
// and the in-place resize of spec.resources
// (InPlacePodLevelResourcesVerticalScaling) and of non-sidecar init
// containers (InPlacePodVerticalScalingInitContainers); the API server
// refuses these resizes of a pod on a node that does not declare them.
func DefaultDeclaredFeatures() []string {
	return []string{
		restartallcontainers.RestartAllContainersOnContainerExits,
		inplacepodresize.IPPRPodLevelResourcesFeatureGate,
		inplacepodresize.IPPRInitContainersFeatureGate,
	}
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// defaultDuration sets *d to def when it is zero and refuses a negative
// one, naming the field (cfg.field) in the error.
func defaultDuration(cfg, field string, d *time.Duration, def time.Duration) error {
	if *d < 0 {
		return fmt.Errorf("kube: %s.%s %v is negative", cfg, field, *d)
	}
	if *d == 0 {
		*d = def
	}
	return nil
}
