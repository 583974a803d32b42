package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/probes"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/images"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/volumes"
)

// Agent is a node agent: it runs the pods its sources describe on its
// runtime, keeps their statuses, and serves /healthz, /pods and /metrics.
type Agent struct {
	cfg     Config
	log     logr.Logger
	rt      runtime.Runtime
	merger  *podsource.Merger
	cache   *pleg.Cache
	pleg    pleg.Generator
	workers *podworkers.PodWorkers
	status  *status.Manager
	probes  *probes.Manager
	volumes Volumes
	loop    *syncloop.Loop
	metrics *metrics
	server  *server.Server

	ready     chan struct{} // closed once the HTTP listener is up, or will never be
	readyOnce sync.Once
	addr      string // the address actually listened on; set before ready closes

	admit   admission.Chain
	evict   *eviction.Manager // nil without Config.Eviction
	imageGC *images.GC        // nil without Config.ImageGC
	stats   server.StatsProvider
	gcMu    sync.Mutex // one container collection at a time
	// quiet: the last housekeeping left nothing to do
	// (housekeepingQuiet).
	quiet atomic.Bool
	// rtCall is the runtime Status call in flight, nil when none is;
	// only checkRuntime uses it (see there). Healthy reads rtSince.
	rtCall *statusCall

	// mu guards pods, reasons, told, failed, resizes, restored,
	// allocGen, stopping, rtErr and rtSince.
	mu      sync.Mutex
	pods    map[types.UID]*v1.Pod // the desired pods, by UID
	reasons map[types.UID]map[string]status.Reason
	told    map[types.UID]bool // PodTerminated succeeded with a deletionTimestamp
	// rtErr is the runtime's last Status verdict, an error until the
	// first; rtSince is when the Status call in flight began on
	// the clock, zero when none is.
	rtErr   error
	rtSince time.Time
	failed  map[types.UID]failure      // pods the agent failed itself: rejected, evicted or shut down
	resizes map[types.UID]*resizeState // the admitted pods' allocations and resizes
	// restored holds the allocations read from Config.AllocationCheckpoint
	// that no pod has claimed yet; allocGen counts the changes of
	// resizes' and restored's allocations, which saveAllocations writes.
	restored map[types.UID]allocation
	allocGen uint64
	// ckptMu orders the checkpoint's writes; it guards ckptSum and
	// ckptGen, the checksum and allocGen of the last one written.
	ckptMu  sync.Mutex
	ckptSum string
	ckptGen uint64
	// stopping holds the channels Shutdown waits on, closed once the
	// pod's worker has stopped its containers.
	stopping map[types.UID]chan struct{}

	shuttingDown atomic.Bool // Shutdown was called
}

// New builds an agent from cfg. It does no I/O and starts nothing.
func New(cfg Config) (*Agent, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := cfg.Shutdown.validate(); err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:     cfg,
		log:     cfg.Logger,
		ready:   make(chan struct{}),
		pods:    map[types.UID]*v1.Pod{},
		reasons: map[types.UID]map[string]status.Reason{},
		told:    map[types.UID]bool{},
		failed:  map[types.UID]failure{},
		resizes: map[types.UID]*resizeState{},
		// Until the runtime's first answer, as the kubelet's node is not
		// ready before its first runtime check.
		rtErr: errors.New("agent: the runtime has not answered Status yet"),

		stopping: map[types.UID]chan struct{}{},
	}
	a.status = status.New(status.Config{Sink: cfg.StatusSink, Clock: cfg.Clock, Logger: cfg.Logger.WithName("status"),
		CouldHaveRunningContainers: a.couldHaveRunningContainers})
	hostIP := ""
	if len(cfg.NodeIPs) > 0 {
		hostIP = cfg.NodeIPs[0]
	}
	prober := cfg.Prober
	if prober == nil {
		h := &probes.Handlers{HostIP: hostIP}
		if cfg.RuntimeService != nil {
			h.Exec = cfg.RuntimeService
		}
		prober = h
	}
	var err error
	if a.admit, err = newAdmission(&cfg, a.pressure); err != nil {
		return nil, err
	}
	if a.probes, err = probes.New(probes.Config{
		Prober: prober, Status: a.status.GetPodStatus, Clock: cfg.Clock, Logger: cfg.Logger.WithName("probes"),
		Events: cfg.Events, Registerer: cfg.Registry,
	}); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.volumes = cfg.Volumes
	if a.volumes == nil {
		podsDir := cfg.CRI.PodsDir
		if podsDir == "" {
			podsDir = cri.DefaultPodsDir
		}
		plugins := cfg.VolumePlugins
		if plugins == nil {
			pc := volumes.PluginConfig{Tokens: cfg.Tokens, Allocatable: cfg.Allocatable, Clock: cfg.Clock}
			if cfg.CRI.Objects != nil {
				pc.Objects = cfg.CRI.Objects
			}
			plugins = volumes.DefaultPlugins(pc)
		}
		if a.volumes, err = volumes.New(volumes.Config{
			PodsDir: podsDir, Plugins: plugins, Clock: cfg.Clock, Logger: cfg.Logger.WithName("volumes"), Events: cfg.Events,
			Registerer: cfg.Registry,
		}); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	a.rt = cfg.Runtime
	if a.rt == nil {
		c := cfg.CRI
		if c.Volumes == nil {
			c.Volumes = a.volumes
		}
		c.RuntimeService, c.ImageService = cfg.RuntimeService, cfg.ImageService
		c.Clock, c.Logger, c.Events = cfg.Clock, cfg.Logger.WithName("runtime"), cfg.Events
		if c.Registerer == nil {
			c.Registerer = cfg.Registry
		}
		if c.NodeName == "" {
			c.NodeName = cfg.NodeName
		}
		if len(c.NodeIPs) == 0 {
			c.NodeIPs = cfg.NodeIPs
		}
		if c.NodeAllocatable == nil {
			c.NodeAllocatable = cfg.Allocatable
		}
		if c.Probes == nil {
			c.Probes = probeResults{a.probes}
		}
		rt, err := cri.New(c)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		a.rt = rt
	}
	if a.merger, err = podsource.NewMerger(podsource.MergerConfig{Sources: cfg.Sources, Logger: cfg.Logger.WithName("podsource"), Events: cfg.Events}); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.cache = pleg.NewCache()
	plegCfg := pleg.Config{
		Runtime: a.rt, Cache: a.cache, RelistPeriod: cfg.RelistPeriod,
		Clock: cfg.Clock, Logger: cfg.Logger.WithName("pleg"), Registerer: cfg.Registry,
	}
	if cfg.EventedPLEG && cfg.RuntimeService != nil {
		a.pleg, err = pleg.NewEvented(pleg.EventedConfig{Config: plegCfg, Streamer: cfg.RuntimeService})
	} else {
		a.pleg, err = pleg.NewGeneric(plegCfg)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if a.workers, err = podworkers.New(podworkers.Config{
		Handler: a, Cache: a.cache, ResyncInterval: cfg.ResyncInterval, BackOffPeriod: cfg.BackOffPeriod,
		Clock: cfg.Clock, Logger: cfg.Logger.WithName("podworkers"), Registerer: cfg.Registry,
	}); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if a.loop, err = syncloop.New(syncloop.Config{
		Handler: a, Updates: a.merger.Updates(), Events: a.pleg.Watch(), ProbeUpdates: a.probes.Updates(), Lookup: a.lookup,
		Due: a.workers.Due, NextDue: a.workers.NextDue, DueChanged: a.workers.DueChanged(),
		HousekeepingPeriod: cfg.HousekeepingPeriod, Quiet: a.housekeepingQuiet, QuietHousekeepingPeriod: cfg.QuietHousekeepingPeriod,
		Clock: cfg.Clock, Logger: cfg.Logger.WithName("syncloop"),
	}); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if a.metrics, err = newMetrics(cfg.Registry, a); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if a.server, err = a.newServer(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if a.imageGC, err = a.newImageGC(); err != nil {
		return nil, err
	}
	if a.evict, err = a.newEviction(); err != nil {
		return nil, err
	}
	return a, nil
}

// Run runs every part until ctx ends or one fails; the first failure
// stops the others. It returns when all of them have stopped. Pods are
// left running in the runtime, as the kubelet leaves them.
func (a *Agent) Run(ctx context.Context) error {
	defer a.markReady() // Addr never waits for a Run that has returned
	if err := a.restoreAllocations(); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	if a.cfg.Listen != "" {
		lis, err := net.Listen("tcp", a.cfg.Listen)
		if err != nil {
			return fmt.Errorf("agent: %w", err) // "listen tcp ADDR: bind: ..."
		}
		a.addr = lis.Addr().String()
		g.Go(func() error { return a.server.Serve(ctx, lis, a.cfg.Server.TLS) })
	}
	a.markReady()
	// In dependency order: the runtime answers, the status manager and
	// the workers run before anything feeds them.
	if !a.waitForRuntime(ctx) {
		return g.Wait() // ctx ended first
	}
	g.Go(func() error { return a.watchRuntime(ctx) })
	g.Go(func() error { return a.status.Run(ctx) })
	g.Go(func() error { return a.volumes.Run(ctx) })
	g.Go(func() error { return a.workers.Run(ctx) })
	g.Go(func() error { return a.probes.Run(ctx) })
	g.Go(func() error { return a.pleg.Run(ctx) })
	g.Go(func() error { return a.loop.Run(ctx) })
	g.Go(func() error { return a.merger.Run(ctx) })
	g.Go(func() error { return a.runContainerGC(ctx) })
	g.Go(func() error { return a.runLogRotation(ctx) })
	if a.evict != nil {
		g.Go(func() error { return a.evict.Run(ctx) })
	}
	if a.imageGC != nil {
		g.Go(func() error { return a.imageGC.Run(ctx) })
	}
	return g.Wait()
}

// Addr returns the address the HTTP server listens on. It blocks until
// Run has started the server or given up on it, so call it once Run was
// started. It returns "" when there is no server: Config.Listen is empty,
// or Run could not listen (Run returns the error, naming the address).
// Safe for concurrent use.
func (a *Agent) Addr() string {
	<-a.ready
	return a.addr
}

func (a *Agent) markReady() { a.readyOnce.Do(func() { close(a.ready) }) }

// Healthy reports whether the runtime is ready and the PLEG is current.
// It fails until the runtime first answers Status, then with the last
// check's verdict (the call's error, the runtime's not-ready reason, or
// its timeout), and at once, whatever that verdict, while a Status call
// has waited for Config.RuntimeStatusTimeout or longer on the clock,
// naming the timeout and how long the call has waited. It does not
// block; safe for concurrent use.
func (a *Agent) Healthy() error {
	return errors.Join(a.runtimeHealth(), a.pleg.Healthy())
}

// Pods returns the pods the agent runs, with their latest statuses, as
// the kubelet's /pods does.
func (a *Agent) Pods() []*v1.Pod {
	a.mu.Lock()
	want := make(map[types.UID]*v1.Pod, len(a.pods))
	for uid, p := range a.pods {
		want[uid] = p
	}
	a.mu.Unlock()
	// One copy of each spec and of each status: the status manager's
	// statuses are copied, not its pods.
	statuses := make(map[types.UID]v1.PodStatus, len(want))
	a.status.Range(func(uid types.UID, st *v1.PodStatus) bool {
		if _, ok := want[uid]; ok {
			statuses[uid] = *st.DeepCopy()
		}
		return true
	})
	out := make([]*v1.Pod, 0, len(want))
	for uid, spec := range want {
		pod := spec.DeepCopy()
		if st, ok := statuses[uid]; ok { // else not synced yet
			pod.Status = st
		}
		out = append(out, pod)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// PodChanges returns a channel that receives a value whenever a pod's
// status changes or a pod's status is forgotten after its removal, so a
// consumer reads Pods again only then instead of polling; and a cancel
// function that unregisters it and closes the channel. It is
// status.Manager.Subscribe: the channel has capacity 1 and changes
// coalesce into one pending value. A pod added or updated by its source
// shows in Pods before its first status change signals. Safe for
// concurrent use, before and during Run.
func (a *Agent) PodChanges() (changes <-chan struct{}, cancel func()) {
	return a.status.Subscribe()
}

func (a *Agent) lookup(uid types.UID) (*v1.Pod, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pods[uid]
	return p, ok
}

// metrics are the agent's own, by the kubelet's names.
type metrics struct {
	startDuration prometheus.Histogram
	rejections    *prometheus.CounterVec
	preemptions   *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, a *Agent) (*metrics, error) {
	m := &metrics{
		startDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_start_duration_seconds",
			Help:    "Duration in seconds from the agent seeing a pod for the first time to the pod starting to run.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "admission_rejections_total", Help: "Cumulative number pod admission rejections by the Kubelet.",
		}, []string{"reason"}),
		preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "preemptions", Help: "Cumulative number of pod preemptions by preemption resource",
		}, []string{"preemption_signal"}),
	}
	running := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Subsystem: "kubelet", Name: "running_pods", Help: "Number of pods that have a running pod sandbox.",
	}, func() float64 {
		n := 0
		a.status.Range(func(_ types.UID, st *v1.PodStatus) bool {
			for _, c := range st.Conditions {
				if c.Type == v1.PodReadyToStartContainers && c.Status == v1.ConditionTrue {
					n++
				}
			}
			return true
		})
		return float64(n)
	})
	for _, c := range []prometheus.Collector{m.startDuration, m.rejections, m.preemptions, running, a.status} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// probeResults adapts the probe manager, keyed by "type://id", to what
// the runtime asks; both speak runtime.ProbeResult.
type probeResults struct{ m *probes.Manager }

func (p probeResults) Liveness(id runtime.ContainerID) runtime.ProbeResult {
	return p.m.Liveness(id.String())
}

func (p probeResults) Startup(id runtime.ContainerID) runtime.ProbeResult {
	return p.m.Startup(id.String())
}
