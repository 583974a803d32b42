package cri

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri/images"
)

// Defaults of Config, the kubelet's.
const (
	DefaultPodLogsDir = "/var/log/pods"
	DefaultPodsDir    = "/var/lib/nodekit/pods"
	// DefaultCgroupMount is where cgroups are mounted.
	DefaultCgroupMount = "/sys/fs/cgroup"
	DefaultResolvConf  = "/etc/resolv.conf"
	// DefaultNodeHostsFile is the node's hosts file, which host-network
	// pods get.
	DefaultNodeHostsFile = "/etc/hosts"
	// Crash-loop back-off: 10 s doubling to 5 min, reset after a
	// container ran 10 min.
	DefaultCrashLoopInitial = 10 * time.Second
	DefaultCrashLoopMax     = 300 * time.Second
	// Image-pull back-off: 10 s doubling to 5 min.
	DefaultImagePullInitial = images.DefaultBackOffInitial
	DefaultImagePullMax     = images.DefaultBackOffMax
	// DefaultImagePullTimeout bounds one image pull: 30 min, where the
	// kubelet sets no bound (see images.DefaultPullTimeout).
	DefaultImagePullTimeout = images.DefaultPullTimeout
)

// ObjectGetter gives the runtime the configMaps and secrets that pods
// refer to (env, envFrom, image pull secrets). Errors that wrap
// runtime.ErrNotFound mean the object does not exist.
type ObjectGetter interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// ServiceLister gives the runtime the services whose addresses become
// containers' environment variables (FOO_SERVICE_HOST, FOO_PORT...), as the
// kubelet injects them. ListServices returns the services of one namespace
// in any order; the runtime reads the pod's namespace (unless the pod sets
// enableServiceLinks: false) and the "default" namespace, of which it uses
// only the "kubernetes" service. It must be safe for concurrent use and
// should not block on the network (a cache). An error fails the container
// with CreateContainerConfigError and the pod is retried, except for a
// static pod, which then starts without service variables, as the kubelet
// starts static pods before it has read any service. kube.Services
// implements it.
type ServiceLister interface {
	ListServices(ctx context.Context, namespace string) ([]*v1.Service, error)
}

// ImageManager makes sure a container's image is present before the
// container is created; *images.Manager is the default one.
type ImageManager interface {
	// EnsureImage returns the container's image as the runtime describes
	// it, pulling it if its pull policy says so. On failure it also
	// returns the container's waiting reason (ErrImagePull,
	// ImagePullBackOff, ErrImageNeverPull, InvalidImageName, or any
	// other the implementation chooses), which SyncPod reports. field
	// names the container in errors ("spec.containers[app]"). It may block
	// until ctx ends and must be safe for concurrent use.
	EnsureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, field string, sandboxConfig *runtimeapi.PodSandboxConfig) (image *runtimeapi.Image, reason string, err error)
}

// Volumes tells the runtime where a pod's volumes are on the host, so
// volumeMounts become CRI mounts; nodekit's volumes package implements it.
type Volumes interface {
	// HostPath returns the host directory or file of the pod's volume.
	HostPath(pod *v1.Pod, volume string) (string, error)
}

// ReadOnlyVolumes is an optional capability of Volumes: a volume for
// which MountReadOnly reports true is mounted read-only whatever its
// volumeMount says, as the kubelet mounts the volumes whose plugin says
// so (configMap, secret, downwardAPI, projected). *volumes.Manager
// implements it. Without it a mount is read-only as its volumeMount says.
type ReadOnlyVolumes interface {
	MountReadOnly(pod *v1.Pod, volume string) bool
}

// EventFunc receives the events the runtime records about a pod
// (Pulling, Pulled, Failed, BackOff, Created, Started, Killing,
// FailedPostStartHook, FailedPreStopHook...). typ is v1.EventTypeNormal or
// v1.EventTypeWarning. It is an alias of runtime.EventFunc: it must not
// block.
type EventFunc = runtime.EventFunc

// Config configures a Runtime. Only RuntimeService and ImageService are
// required; every other field's zero value is the documented default.
type Config struct {
	// RuntimeService and ImageService are the CRI services to drive:
	// a *criclient.Client from criclient.Dial, a *fakecri.Runtime, or
	// any other implementation.
	RuntimeService criapi.RuntimeService
	ImageService   criapi.ImageManagerService
	// RuntimeHandler is the CRI runtime handler for sandboxes
	// ("" is the runtime's default).
	RuntimeHandler string

	// PodLogsDir is the root of the pod log directories
	// (<root>/<namespace>_<name>_<uid>/<container>/<restart>.log).
	// Default DefaultPodLogsDir. Must be absolute.
	PodLogsDir string
	// PodsDir holds per-pod state on the host: the pod's hosts file at
	// <root>/<uid>/etc-hosts and termination message files at
	// <root>/<uid>/containers/<container>/<id>. Default DefaultPodsDir.
	// Must be absolute.
	PodsDir string
	// NodeHostsFile is the node's hosts file: a host-network pod's
	// containers get its content (after a header, and followed by the
	// pod's hostAliases) at /etc/hosts. Default DefaultNodeHostsFile.
	NodeHostsFile string

	// Objects resolves configMaps and secrets. Nil: a pod that refers to
	// one fails with CreateContainerConfigError (or pulls without the
	// pull secret).
	Objects ObjectGetter
	// Services lists the services for service environment variables.
	// Nil: containers get none, as with a kubelet without an API server
	// (a node that runs only static pods).
	Services ServiceLister
	// Volumes resolves volume host paths. Nil: a container with
	// volumeMounts fails with CreateContainerConfigError.
	Volumes Volumes
	// Probes gives liveness and startup results. Nil: no probe ever
	// fails, and sidecars count as started once running.
	Probes ProbeResults

	// Images pulls containers' images. Nil: an *images.Manager over
	// ImageService, Objects (for pull secrets), Clock and Events, with
	// the image settings below, which are otherwise ignored.
	Images ImageManager

	// CrashLoopBackOff and ImagePullBackOff are the restart and pull
	// back-offs. Zero fields take the Default* values above.
	CrashLoopBackOff BackOff
	ImagePullBackOff BackOff
	// MaxParallelImagePulls bounds concurrent pulls. 0 or 1 serializes
	// pulls, the kubelet's default.
	MaxParallelImagePulls int
	// ImagePullTimeout bounds one image pull (every credential tried),
	// counted on Clock from when the pull gets its slot, so waiting
	// behind other pulls does not count. A pull cut off fails with
	// ErrImagePull and enters the pull back-off. Default
	// DefaultImagePullTimeout; negative means no bound. Pulls also end
	// when the caller's context does.
	ImagePullTimeout time.Duration

	// NodeName, NodeIPs and NodeAllocatable feed the downward API
	// (spec.nodeName, status.hostIP(s), and resourceFieldRef of a
	// container without limits). NodeAllocatable's memory also sets the
	// OOM score of burstable containers; without it they get 999...2 from
	// requests against 1 TiB.
	NodeName        string
	NodeIPs         []string
	NodeAllocatable v1.ResourceList

	// ClusterDNS and ClusterDomain serve dnsPolicy ClusterFirst; without
	// ClusterDNS such pods fall back to the node's resolver, as with the
	// kubelet. ClusterDomain also ends the domain of a pod with a
	// subdomain (<subdomain>.<namespace>.svc.<ClusterDomain>) in its
	// /etc/hosts and, under setHostnameAsFQDN, its hostname. ResolvConf is the node's resolver file for dnsPolicy
	// Default (default DefaultResolvConf; "-" for none).
	ClusterDNS    []string
	ClusterDomain string
	ResolvConf    string

	// CgroupRoot, when set, puts each sandbox in the cgroupfs parent
	// <root>/<qos>/pod<uid> (guaranteed pods directly under <root>), the
	// kubelet's layout (its cgroupsPerQOS with the cgroupfs driver, where
	// <root> is /kubepods). nodekit then manages these pod cgroups as the
	// kubelet does: it creates each before the pod's sandbox with the
	// pod's CPU shares, CFS quota and memory limit, resizes it in place
	// with the pod, and removes it once nothing of the pod runs. Empty
	// leaves the cgroup to the runtime.
	CgroupRoot string
	// CgroupMount is where the cgroup hierarchies are mounted (v1, one
	// per controller, or v2): default /sys/fs/cgroup. Used with
	// CgroupRoot only.
	CgroupMount string
	// SeccompRoot is where Localhost seccomp profiles live. Default
	// /var/lib/kubelet/seccomp.
	SeccompRoot string

	// Clock drives back-offs and sleep hooks and stamps observations.
	// Default: the real clock.
	Clock clock.Clock
	// Logger receives V(0) state changes and V(2) routine steps. Default:
	// discard.
	Logger logr.Logger
	// Registerer receives nodekit_runtime_panics_total, the panics
	// recovered from a pod's steps (a lifecycle hook, a container's kill).
	// Nil: not registered.
	Registerer prometheus.Registerer
	// Events receives events about pods. Default: discard.
	Events EventFunc
}

func (c *Config) defaults() error {
	if c.RuntimeService == nil {
		return errors.New("cri: Config.RuntimeService is required")
	}
	if c.ImageService == nil {
		return errors.New("cri: Config.ImageService is required")
	}
	if c.PodLogsDir == "" {
		c.PodLogsDir = DefaultPodLogsDir
	}
	if c.PodsDir == "" {
		c.PodsDir = DefaultPodsDir
	}
	for name, dir := range map[string]string{"PodLogsDir": c.PodLogsDir, "PodsDir": c.PodsDir} {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("cri: Config.%s must be an absolute path, got %q", name, dir)
		}
	}
	if c.CgroupRoot != "" {
		root := path.Clean(c.CgroupRoot)
		if !path.IsAbs(c.CgroupRoot) || root == "/" || strings.Contains(c.CgroupRoot, "..") {
			return fmt.Errorf("cri: Config.CgroupRoot must be an absolute cgroup path below the root, without \"..\", got %q", c.CgroupRoot)
		}
		c.CgroupRoot = root
		if c.CgroupMount == "" {
			c.CgroupMount = DefaultCgroupMount
		}
	}
	if c.ResolvConf == "" {
		c.ResolvConf = DefaultResolvConf
	}
	if c.NodeHostsFile == "" {
		c.NodeHostsFile = DefaultNodeHostsFile
	}
	if c.SeccompRoot == "" {
		c.SeccompRoot = "/var/lib/kubelet/seccomp"
	}
	if c.MaxParallelImagePulls < 0 {
		return fmt.Errorf("cri: Config.MaxParallelImagePulls must not be negative, got %d", c.MaxParallelImagePulls)
	}
	if c.ImagePullTimeout == 0 {
		c.ImagePullTimeout = DefaultImagePullTimeout
	}
	c.CrashLoopBackOff = c.CrashLoopBackOff.withDefaults(DefaultCrashLoopInitial, DefaultCrashLoopMax)
	c.ImagePullBackOff = c.ImagePullBackOff.withDefaults(DefaultImagePullInitial, DefaultImagePullMax)
	for name, b := range map[string]BackOff{"CrashLoopBackOff": c.CrashLoopBackOff, "ImagePullBackOff": c.ImagePullBackOff} {
		if b.Initial <= 0 || b.Max < b.Initial {
			return fmt.Errorf("cri: Config.%s: want 0 < Initial <= Max, got %v and %v", name, b.Initial, b.Max)
		}
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
	return nil
}
