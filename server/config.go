package server

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// PodLister lists the pods the node runs, with their latest statuses, as
// the kubelet's /pods does. It is the node's word on which pods exist:
// /containerLogs, /exec, /attach and /portForward answer 404 for a pod it
// does not list. Pods must be safe for concurrent use and must not block
// for long; the server does not mutate what it returns.
type PodLister interface {
	Pods() []*v1.Pod
}

// PodGetter is an optional PodLister capability: the node's pod
// namespace/name, found without listing every pod. Without it the server
// scans Pods. It must be safe for concurrent use; the server does not
// mutate what it returns, which needs no status.
type PodGetter interface {
	PodByName(namespace, name string) (*v1.Pod, bool)
}

// PodStatusGetter is an optional PodLister capability: the latest API
// status of the node's pod of that UID, which /containerLogs reads, as the
// kubelet does, to find a container's previous instance (the one its
// lastState names: the newest instance while the container waits out a
// restart back-off). Without it the server uses the status of the pod
// Pods listed, when it has one, and else the runtime's instances. It must
// be safe for concurrent use; the server does not mutate what it returns.
type PodStatusGetter interface {
	PodStatus(uid types.UID) (v1.PodStatus, bool)
}

// RuntimeReader is what the server reads from the runtime: the running
// pods (/runningpods/) and one pod's observed containers (the log file of
// a container, whether it still runs, its ID for exec and attach, the
// pod's sandbox for port-forward). runtime.Runtime implements it. Both
// methods block until the runtime answers or ctx ends and must be safe
// for concurrent use.
type RuntimeReader interface {
	GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error)
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error)
}

// StreamingRuntime starts the CRI's streaming calls: each returns the URL
// of the runtime's streaming server that serves the session, which the
// server proxies the client's upgraded connection to. The CRI
// RuntimeService (k8s.io/cri-api/pkg/apis) implements it, and so does
// runtime/fakecri. Each call blocks until the runtime answers or ctx
// ends, and must be safe for concurrent use.
type StreamingRuntime interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// Config configures a Server. Zero fields take the defaults named.
type Config struct {
	// NodeName names the node: it is the name in the authorization
	// attributes (resource nodes). Required when Authorizer is set.
	NodeName string

	// Pods lists the node's pods. Required.
	Pods PodLister
	// Runtime reads the runtime for /runningpods/ and /containerLogs.
	// Default: none, and those paths answer 503.
	Runtime RuntimeReader
	// Streaming serves /exec, /attach and /portForward. Default: none,
	// and those paths answer 503.
	Streaming StreamingRuntime
	// Stats serves /stats/summary and /metrics/resource (NewCRIStats
	// reads them from a CRI runtime and /proc). Default: none, and those
	// paths answer 503.
	Stats StatsProvider
	// Healthy is /healthz: nil error is "ok", any other a 500 with its
	// text. Default: always healthy.
	Healthy func() error
	// Metrics is served on /metrics. Default: an empty registry.
	Metrics prometheus.Gatherer
	// ProbeMetrics is served on /metrics/probes, as the kubelet serves its
	// prober metrics (prober_probe_total, prober_probe_duration_seconds)
	// apart from the rest; the server serves every family it gathers, so
	// it should hold those alone. Default: none, and /metrics/probes
	// answers 404.
	ProbeMetrics prometheus.Gatherer
	// Configz returns the node's configuration, served on /configz as
	// {"kubeletconfig": <value>} like the kubelet's; the value is encoded
	// as JSON. Default: none, and /configz answers 404.
	Configz func() (any, error)

	// Authenticator identifies the client of each request, and
	// Authorizer decides whether it may do what it asks. With neither
	// set, every request is served without a check (for a server on
	// loopback, like the agent's plain HTTP one); with an Authenticator
	// and no Authorizer, every authenticated request is allowed (the
	// kubelet's AlwaysAllow). An Authorizer without an Authenticator is
	// an error.
	Authenticator Authenticator
	Authorizer    Authorizer

	// HTTP bounds requests and the http.Server of Serve.
	HTTP HTTPConfig

	// LogStateCheckPeriod is how often a followed log checks whether its
	// container still runs, when no write wakes it. Default 5s, the
	// kubelet's.
	LogStateCheckPeriod time.Duration

	// Clock times sinceSeconds and the state checks of followed logs.
	// Default: the real clock.
	Clock clock.WithTicker
	// Logger logs authentication and runtime errors. Default: discard.
	Logger logr.Logger
}

// HTTPConfig bounds the server, so that a slow, idle or abusive client
// cannot hold its connections or memory. Zero fields are the defaults
// named.
type HTTPConfig struct {
	// ReadHeaderTimeout is how long a client may take to send a request's
	// headers. Default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout is how long a client may take to send a whole request.
	// Default 30s.
	ReadTimeout time.Duration
	// WriteTimeout is how long a response may take, from the end of the
	// request's headers. A followed log and the streams of exec, attach
	// and port-forward are exempt: they last until either side ends them.
	// Default 1m.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request. Default 90s, the kubelet's.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers; larger ones are answered
	// 431. Default 64 KiB.
	MaxHeaderBytes int
	// MaxBodyBytes bounds a request's body; no endpoint takes one, and a
	// larger one is answered 413. Default 4 KiB.
	MaxBodyBytes int64
}

// Defaults returns c with its zero fields set to the defaults.
func (c HTTPConfig) Defaults() HTTPConfig {
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = time.Minute
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 90 * time.Second
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = 64 << 10
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 4 << 10
	}
	return c
}

func (c *Config) defaults() error {
	if c.Pods == nil {
		return errors.New("server: Config.Pods is required")
	}
	if c.Authorizer != nil && c.Authenticator == nil {
		return errors.New("server: Config.Authorizer is set without Config.Authenticator")
	}
	if c.Authorizer != nil && c.NodeName == "" {
		return errors.New("server: Config.NodeName is required with Config.Authorizer")
	}
	if c.Healthy == nil {
		c.Healthy = func() error { return nil }
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	c.HTTP = c.HTTP.Defaults()
	if c.LogStateCheckPeriod <= 0 {
		c.LogStateCheckPeriod = 5 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger.GetSink() == nil {
		c.Logger = logr.Discard()
	}
	return nil
}
