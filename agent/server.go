package agent

import (
	"crypto/tls"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/server"
)

// ServerConfig configures the node server the agent serves on
// Config.Listen and through Handler: the kubelet's API of package server.
// The zero value serves plain HTTP to everyone, for a loopback address.
type ServerConfig struct {
	// TLS, when set, makes the server on Config.Listen speak HTTPS
	// (server.TLSConfig builds one from certificate files, or a
	// self-signed certificate for the node's names). Default: plain HTTP.
	TLS *tls.Config
	// Authenticator and Authorizer check every request, with the
	// kubelet's answers (401, 403); see server.Config. Default: none.
	Authenticator server.Authenticator
	Authorizer    server.Authorizer
	// Configz returns the configuration served on /configz. Default:
	// none, and /configz answers 404.
	Configz func() (any, error)
	// Stats serves /stats/summary and /metrics/resource, and
	// /metrics/cadvisor when it is a server.ContainerStatsProvider. Default:
	// server.CRIStats over Config.RuntimeService and the node's /proc;
	// none (503) without a RuntimeService.
	Stats server.StatsProvider
}

// Handler serves the node's HTTP API (package server): /healthz ("ok",
// or 500 with the reason), /pods (a v1.PodList), /metrics (Prometheus
// text from the agent's registry), /metrics/probes (its prober_*
// families alone, as the kubelet serves them), /runningpods/, /configz,
// /containerLogs, /stats/summary, /metrics/resource and
// /metrics/cadvisor, and /exec,
// /attach and /portForward through Config.RuntimeService. Each read-only path answers GET and HEAD; other
// methods get 405 with an Allow header, and a request body over
// Config.HTTP.MaxBodyBytes gets 413. With Config.Server's Authenticator
// set, every request is authenticated and authorized first.
func (a *Agent) Handler() http.Handler { return a.server.Handler() }

// ReadOnlyHandler serves the kubelet's read-only port over the agent:
// /healthz, /pods, /metrics, /metrics/probes, /stats/summary and
// /metrics/resource and /metrics/cadvisor without authentication; see
// server.Server.ReadOnlyHandler. The agent does not listen for it: serve
// it with server.NewHTTPServer.
func (a *Agent) ReadOnlyHandler() http.Handler { return a.server.ReadOnlyHandler() }

// PodByName returns the spec of the pod namespace/name the agent runs
// (without its status), for the node server's lookups: it copies that
// pod only, where Pods copies every pod. Safe for concurrent use.
func (a *Agent) PodByName(namespace, name string) (*v1.Pod, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pods {
		if p.Namespace == namespace && p.Name == name {
			return p.DeepCopy(), true
		}
	}
	return nil, false
}

var _ server.PodGetter = (*Agent)(nil)

// newServer builds the node server over the agent: its pods, its runtime,
// and the CRI service for streaming.
func (a *Agent) newServer() (*server.Server, error) {
	cfg := server.Config{
		NodeName:      a.cfg.NodeName,
		Pods:          a,
		Runtime:       a.rt,
		Healthy:       a.Healthy,
		Metrics:       a.cfg.Registry,
		ProbeMetrics:  proberMetrics(a.cfg.Registry),
		Configz:       a.cfg.Server.Configz,
		Authenticator: a.cfg.Server.Authenticator,
		Authorizer:    a.cfg.Server.Authorizer,
		HTTP:          a.cfg.HTTP,
		Clock:         a.cfg.Clock,
		Logger:        a.cfg.Logger.WithName("server"),
	}
	if a.cfg.RuntimeService != nil {
		cfg.Streaming = a.cfg.RuntimeService
	}
	cfg.Stats = a.cfg.Server.Stats
	if cfg.Stats == nil && a.cfg.RuntimeService != nil {
		sc := server.CRIStatsConfig{
			NodeName: a.cfg.NodeName, Runtime: a.cfg.RuntimeService, Images: a.cfg.ImageService, Clock: a.cfg.Clock,
		}
		// The volumes' usage, which the eviction manager checks against
		// emptyDir sizeLimits (volumes.Manager measures it).
		if v, ok := a.volumes.(interface {
			VolumeStats(types.UID) []statsapi.VolumeStats
		}); ok {
			sc.VolumeStats = v.VolumeStats
		}
		stats, err := server.NewCRIStats(sc)
		if err != nil {
			return nil, err
		}
		cfg.Stats = stats
	}
	a.stats = cfg.Stats
	return server.New(cfg)
}

// proberMetrics gathers the prober_* families of g alone, for
// /metrics/probes: the probes register prober_probe_total and
// prober_probe_duration_seconds on the agent's registry, so /metrics
// carries them too (where the kubelet's does not).
func proberMetrics(g prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		all, err := g.Gather()
		var probes []*dto.MetricFamily
		for _, mf := range all {
			if strings.HasPrefix(mf.GetName(), "prober_") {
				probes = append(probes, mf)
			}
		}
		return probes, err
	})
}

// newHTTPServer returns the server Run starts on Config.Listen, bounded by
// cfg.
func newHTTPServer(h http.Handler, cfg HTTPConfig) *http.Server {
	return server.NewHTTPServer(h, cfg)
}

// PodStatus returns the latest API status of the pod of that UID the
// agent runs (a deep copy), for the node server's log lookups. Safe for
// concurrent use.
func (a *Agent) PodStatus(uid types.UID) (v1.PodStatus, bool) { return a.status.GetPodStatus(uid) }

var _ server.PodStatusGetter = (*Agent)(nil)
