package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/probes"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/images"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/volumes"
)

// Volumes is what the agent needs of a volume manager;
// *volumes.Manager implements it. The agent adds a pod (AddPod) at each
// sync and waits for its volumes (WaitForAttachAndMount) before the
// runtime creates its containers, which find the volumes through
// HostPath; once the pod's containers are gone it removes the pod
// (RemovePod) and waits for the teardown (WaitForUnmount); once every
// source has been seen, each housekeeping calls CleanupOrphans, keeping
// the pods a source holds or whose containers may run. Run runs under
// the agent's errgroup. Every method but Run must be safe for concurrent
// use; see volumes.Manager for what each does.
type Volumes interface {
	cri.Volumes
	AddPod(pod *v1.Pod)
	RemovePod(uid types.UID)
	WaitForAttachAndMount(ctx context.Context, pod *v1.Pod) error
	WaitForUnmount(ctx context.Context, uid types.UID) error
	CleanupOrphans(keep func(types.UID) bool) error
	Run(ctx context.Context) error
}

var (
	_ Volumes             = (*volumes.Manager)(nil)
	_ cri.ReadOnlyVolumes = (*volumes.Manager)(nil)
)

// Config configures an Agent. Every part is replaceable; the zero value
// of each field is the documented default.
type Config struct {
	// NodeName names the node: static pods are suffixed with it. Default:
	// the host name, lower-cased.
	NodeName string
	// NodeIPs are the node's addresses, for status.hostIP and the pod IPs
	// of host-network pods. Default: none.
	NodeIPs []string

	// Runtime runs the pods. Default: runtime/cri over RuntimeService and
	// ImageService, which are then required.
	Runtime        runtime.Runtime
	RuntimeService criapi.RuntimeService
	ImageService   criapi.ImageManagerService
	// CRI configures the default runtime (log and pod directories,
	// back-offs, DNS...); its service, clock, logger and event fields are
	// filled by the agent.
	CRI cri.Config

	// Volumes sets up the volumes of the pods before their containers
	// start and tears them down once their containers are gone; it is
	// also the default runtime's Config.Volumes (CRI.Volumes, unless
	// set). Default: a volumes.Manager over CRI.PodsDir (default
	// cri.DefaultPodsDir) with VolumePlugins, the agent's clock, logger
	// and events, and the host's mounter.
	Volumes Volumes
	// VolumePlugins are the volume types of the default Volumes, the
	// first supporting plugin winning. Nil: volumes.DefaultPlugins, with
	// CRI.Objects as the getter of configMaps and secrets, Tokens and
	// Allocatable.
	VolumePlugins []volumes.Plugin
	// Tokens gives the service-account tokens of projected volumes
	// (kube.Tokens asks the API server). Default: none; a pod with a
	// serviceAccountToken projection then waits with FailedMount.
	Tokens volumes.TokenGetter
	// Allocatable is the node's allocatable resources: the pods admitted
	// must fit in them (OutOfcpu, OutOfmemory, OutOfpods...; a resource
	// not listed is not checked), and a resourceFieldRef (in env, and in
	// downwardAPI volumes) shows them for a container without that
	// limit: it is also the default runtime's CRI.NodeAllocatable, unless
	// that is set. Its memory, less the pods' working sets, is the
	// eviction manager's allocatableMemory.available. Default: none (no
	// resource is checked; such a field shows 0).
	Allocatable v1.ResourceList
	// AllocationCheckpoint is a file in which the agent keeps what it
	// allocated to each admitted pod (its containers' requests and limits
	// and its spec.resources, as admitted or as last resized), as the
	// kubelet keeps allocated_pods_state in its root directory (the format
	// is nodekit's own: give it another name than the kubelet's): an agent
	// that restarts admits its pods again with what they were given, not
	// with a resize their spec asks for meanwhile, which it then decides
	// on as any other. Run creates its directory, and refuses to start on
	// a corrupt file, naming it. Default: "", allocations in memory only.
	AllocationCheckpoint string

	// NodeLabels are the node's labels, which spec.nodeSelector and
	// required node affinity must match for a pod to be admitted;
	// kubernetes.io/hostname is NodeName unless set here. Default: only
	// that one.
	NodeLabels map[string]string
	// NodeTaints are the node's taints; a pod that does not tolerate a
	// NoExecute one is refused (TaintToleration), as the kubelet does.
	// Default: none.
	NodeTaints []v1.Taint
	// AllowedUnsafeSysctls are the sysctls (names or "prefix.*") a pod
	// may set beyond the safe ones; others are refused (SysctlForbidden).
	// Default: none.
	AllowedUnsafeSysctls []string
	// AdmitHandlers run after the kubelet's admission checks (pressure,
	// sysctls, OS, resources against Allocatable, node affinity, node
	// name, host ports, NoExecute taints; see admission.Defaults), on
	// each pod added by a source: the first refusal fails the pod with
	// its reason and "Pod was rejected: <message>" and a warning event,
	// and the pod is never started. Default: none.
	AdmitHandlers []admission.Handler

	// Eviction, when set, runs an eviction manager over the node server's
	// stats (Server.Stats, or server.CRIStats over RuntimeService): it
	// reports pressure (Agent.Pressure; admission refuses pods under
	// it), frees dead containers (and images, with ReclaimImages) when
	// disk is short, and evicts one pod per pass while a threshold is
	// met, recording it Failed with reason Evicted and the kubelet's
	// message. Default: nil, no eviction manager; &EvictionConfig{} gives
	// the kubelet's defaults.
	Eviction *EvictionConfig
	// Shutdown is how Agent.Shutdown terminates the pods when the node
	// shuts down (the kubelet's shutdownGracePeriod,
	// shutdownGracePeriodCriticalPods and
	// shutdownGracePeriodByPodPriority). Default: none; Shutdown then
	// kills nothing and returns an error.
	Shutdown ShutdownConfig
	// ImageGC, when set, removes unused images (images.GC) over
	// ImageService and RuntimeService, with the image filesystem's usage
	// from the node server's stats: every Period (5m) above
	// HighThresholdPercent (85) down to LowThresholdPercent (80), and
	// every unused one when the eviction manager finds disk short. Its
	// Images, Containers, FsUsage, Clock and Logger are the agent's.
	// Default: nil, images are never removed.
	ImageGC *images.GCConfig

	// RuntimeStatusTimeout bounds the runtime's answer to Status, asked at
	// start-up and every 5s: a call unanswered for this long makes
	// /healthz fail, naming the timeout. Default 5s.
	RuntimeStatusTimeout time.Duration

	// Sources provide the pods. At least one is required: a
	// podsource.File for static pods, a podsource.HTTP, a
	// podsource.Channel, or a source of your own.
	Sources []podsource.Source

	// StatusSink receives pod statuses. Default: none (statuses are served
	// on /pods only).
	StatusSink status.Sink

	// PodTerminated is called when a pod's worker has finished it: the pod
	// was stopped (deleted, evicted or terminal), its containers and
	// sandboxes are gone, and its final status was handed to the status
	// manager. It gets the newest spec the agent had, with its
	// deletionTimestamp if a source deleted it gracefully. An error makes
	// the worker call it again after a back-off (a cancelled ctx ends the
	// retries with the agent); once it returns nil it is not called again
	// for that pod UID, but in one case: a pod whose worker had finished
	// (it reached Succeeded or Failed) before a source began to delete it
	// gets a call with its deletionTimestamp at the next housekeeping, and
	// at each one after until that call returns nil. kube.PodDeleter is the
	// kubelet's use: it deletes the pod object once its containers are
	// gone. It runs on the pod's worker, or for that one case on the sync
	// loop, so it should not block for long. Default: none.
	PodTerminated func(ctx context.Context, pod *v1.Pod) error

	// Prober runs probes. Default: probes.Handlers, with exec through
	// RuntimeService and host-network pods reached at the first NodeIP.
	Prober probes.Prober

	// RelistPeriod is the PLEG's relist period. Default 1s.
	RelistPeriod time.Duration
	// EventedPLEG drives the PLEG from the CRI container event stream of
	// RuntimeService, with a relist every 5 minutes as a safety net; a
	// runtime without the stream (containerd 1.6) is relisted every
	// RelistPeriod instead, and the stream is tried again every 10s.
	// Default false: relisting only, as the kubelet does by default.
	EventedPLEG bool
	// ResyncInterval is how often every pod is synced without an event.
	// Default 1m.
	ResyncInterval time.Duration
	// BackOffPeriod is how soon a failed sync is retried. Default 10s.
	BackOffPeriod time.Duration
	// HousekeepingPeriod is how often orphans, statuses and dead
	// containers are cleaned up. Default 2s.
	HousekeepingPeriod time.Duration
	// QuietHousekeepingPeriod is how often housekeeping runs while the
	// last pass left nothing to do and nothing has happened since (no
	// source update, PLEG event or probe result): every pod a
	// worker holds is wanted and syncs or has finished, the runtime runs
	// no pod no source wants, no status waits to be forgotten, no resize
	// waits, no deletion is pending. Anything that happens brings the
	// next pass back to HousekeepingPeriod (see package syncloop).
	// Default 20s; any positive value up to HousekeepingPeriod gives
	// the kubelet's fixed period.
	QuietHousekeepingPeriod time.Duration
	// GCPolicy bounds dead containers. Default: one dead instance per pod
	// container, no node limit, no minimum age.
	GCPolicy *runtime.GCPolicy
	// ContainerGCPeriod is how often dead containers are collected, on a
	// goroutine of their own.
	// Default 1m, the kubelet's.
	ContainerGCPeriod time.Duration
	// ContainerLogMaxSize is the size in bytes beyond which a running
	// container's log is rotated, checked over RuntimeService (see
	// cri.LogRotator). 0 means 10Mi, the kubelet's; negative turns
	// rotation off. Without RuntimeService logs are not rotated.
	ContainerLogMaxSize int64
	// ContainerLogMaxFiles is the most files a container's log may take,
	// the live one included. 0 means 5, the kubelet's; otherwise at least 2.
	ContainerLogMaxFiles int
	// ContainerLogMaxWorkers is how many containers' logs are rotated at
	// once. 0 means 1, the kubelet's; negative is an error.
	ContainerLogMaxWorkers int
	// ContainerLogMonitorInterval is how often the running containers'
	// logs are checked. 0 means 10s, the kubelet's.
	ContainerLogMonitorInterval time.Duration

	// Listen is the address of the node server (Handler: /healthz,
	// /pods, /metrics, /containerLogs, /exec...) ("127.0.0.1:10255"). Empty: no server (Handler still serves them).
	Listen string
	// HTTP bounds the server on Listen: timeouts, header and body sizes.
	HTTP HTTPConfig
	// Server configures the node server's TLS, authentication,
	// authorization, /configz and stats.
	Server ServerConfig
	// Registry receives the agent's metrics and is served on /metrics.
	// Default: a private registry (never the global one).
	Registry *prometheus.Registry

	Clock  clock.WithTickerAndDelayedExecution
	Logger logr.Logger
	// Events receives events about pods (pod nil: about a manifest).
	// Default: logged at V(0) for warnings and V(2) otherwise.
	Events runtime.EventFunc
}

func (c *Config) defaults() error {
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return errors.New("agent: Config.NodeName is empty and the host name is unknown")
		}
		c.NodeName = strings.ToLower(h)
	}
	if c.Runtime == nil && (c.RuntimeService == nil || c.ImageService == nil) {
		return errors.New("agent: Config.Runtime, or Config.RuntimeService and Config.ImageService, are required")
	}
	if len(c.Sources) == 0 {
		return errors.New("agent: Config.Sources is empty")
	}
	if c.ContainerLogMaxFiles != 0 && c.ContainerLogMaxFiles < 2 {
		return fmt.Errorf("agent: Config.ContainerLogMaxFiles is %d, must be at least 2", c.ContainerLogMaxFiles)
	}
	if c.ContainerLogMaxWorkers < 0 {
		return fmt.Errorf("agent: Config.ContainerLogMaxWorkers is %d, must be at least 1", c.ContainerLogMaxWorkers)
	}
	if c.ContainerLogMonitorInterval < 0 {
		return fmt.Errorf("agent: Config.ContainerLogMonitorInterval is %v, must be positive", c.ContainerLogMonitorInterval)
	}
	if c.RuntimeStatusTimeout <= 0 {
		c.RuntimeStatusTimeout = 5 * time.Second
	}
	if c.RelistPeriod <= 0 {
		c.RelistPeriod = time.Second
	}
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = time.Minute
	}
	if c.BackOffPeriod <= 0 {
		c.BackOffPeriod = 10 * time.Second
	}
	if c.HousekeepingPeriod <= 0 {
		c.HousekeepingPeriod = 2 * time.Second
	}
	if c.ContainerGCPeriod <= 0 {
		c.ContainerGCPeriod = time.Minute
	}
	if c.GCPolicy == nil {
		c.GCPolicy = &runtime.GCPolicy{MaxPerPodContainer: 1, MaxContainers: -1}
	}
	c.HTTP = c.HTTP.Defaults()
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger.GetSink() == nil {
		c.Logger = logr.Discard()
	}
	if c.Events == nil {
		log := c.Logger
		c.Events = func(pod *v1.Pod, typ, reason, msg string) {
			kv := []any{"reason", reason, "message", msg}
			if pod != nil {
				kv = append(kv, "pod", pod.Namespace+"/"+pod.Name)
			}
			if typ == v1.EventTypeWarning {
				log.Info("warning event", kv...)
			} else {
				log.V(2).Info("event", kv...)
			}
		}
	}
	return nil
}

// HTTPConfig bounds the agent's HTTP server, so that a slow, idle or
// abusive client cannot hold its connections or memory: the node
// server's limits (see server.HTTPConfig for the fields and defaults).
type HTTPConfig = server.HTTPConfig
