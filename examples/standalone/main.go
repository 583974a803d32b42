// Command standalone is a node agent that runs the pods of a manifest
// directory, on nodekit's built-in in-memory runtime (fakecri) or on a
// real CRI runtime, and prints a table of the pods whenever it changes:
//
//	go run ./examples/standalone --manifests examples/standalone/manifests
//	go run ./examples/standalone --runtime-endpoint unix:///run/containerd/containerd.sock
//
// It serves the node server (package server) on --listen: /healthz, /pods
// (a v1.PodList with statuses, as the kubelet's /pods), /metrics (the
// agent's metrics with the Go runtime's and the process's, as the kubelet's),
// /containerLogs, /stats/summary, /exec, /attach, /portForward and the
// rest, plain HTTP without authentication, with the agent's timeouts and
// size limits (see package agent). On fakecri, exec of cat and attach
// echo stdin, and forwarded ports echo. An address it cannot
// listen on ends it at once with status 1 and an error naming the address
// ("listen tcp 127.0.0.1:10255: bind: address already in use").
//
// A runtime that is not there yet (its socket missing, or not answering)
// is waited for, with back-off from 100ms to 5s, logging "waiting for the
// runtime" with the endpoint and the error, until it answers or the
// command is stopped; an endpoint that can never work (not a unix socket,
// not a CRI runtime) is an error at once.
//
// --profiling serves Go's /debug/pprof on a loopback address only (any
// other is refused), from its own mux, with its own timeouts; its write
// timeout of 2 minutes leaves room for the default 30-second CPU profile
// (pprof refuses a profile as long as the write timeout).
//
// It is made for a small node, where memory is scarcer than CPU: unless
// its environment sets GOGC, it collects garbage at GOGC=50
// (DefaultGCPercent), so its heap grows to one and a half times the live
// heap instead of Go's twice, and unless --profiling is given it samples
// no allocations for heap profiles, which nothing else reads. Built as
// README.md says (CGO_ENABLED=0, -tags grpcnotrace), 100 pods on fakecri
// then peak at 28.6–29.7 MiB of RSS instead of 30.3–31.6 MiB at
// GOGC=100, for a few hundredths of a percent of a core more when idle
// (hack/benchagent; README.md has the figures). GOGC=100 in the
// environment restores Go's default.
//
// It is made, too, for a node that is idle most of its life: it runs Go
// code on one CPU at a time (GOMAXPROCS=1,
// DefaultMaxProcs) unless its environment sets GOMAXPROCS. An idle agent
// spends most of its CPU on threads woken to hand work from one goroutine
// to another (a relist's call wakes gRPC's writer and reader goroutines);
// with one Go processor the goroutine that readies another does not wake
// a second thread to run it. On fakecri with 100 pods and the generic
// PLEG that is a third fewer wake-ups idle (22-23 a second instead of
// 33-34) and 0.185-0.191 % of a core instead of 0.216-0.230 %; 1000
// pods started in 4.9-8.2 s instead of 4.1-9.3 s, on 2.7-4.6 s of CPU
// instead of 3.0-6.3 s (both PLEGs, two runs each, 2 CPUs;
// hack/benchagent with and without -procs 2). A node whose agent has
// CPU-heavy work of its own (many exec or HTTP probes, thousands of pods
// starting at once on many CPUs) can give it more: GOMAXPROCS=0 in the
// environment restores Go's default (every CPU the process may use).
//
// On SIGINT, SIGTERM or SIGHUP it stops cleanly: the agent's parts stop,
// the HTTP servers close, and it exits 0, leaving the pods running in the
// runtime, as the kubelet does. Stopped while it still waits for its
// runtime, it exits 0 too.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// DefaultGCPercent is the GOGC the command runs with when its environment
// sets none.
const DefaultGCPercent = 50

// DefaultMaxProcs is the GOMAXPROCS the command runs with when its
// environment sets none.
const DefaultMaxProcs = 1

// DefaultListen is the agent's fixed default address: loopback and the
// kubelet's read-only port.
const DefaultListen = "127.0.0.1:10255"

type options struct {
	manifests, endpoint, listen, nodeName, logsDir, podsDir string
	verbosity                                               int
	relist                                                  time.Duration
	profiling                                               string
	quiet, evented                                          bool
	clock                                                   clock.Clock // the runtime wait's; default real
}

func main() {
	var o options
	flag.StringVar(&o.manifests, "manifests", "examples/standalone/manifests", "directory of pod manifests (YAML or JSON, one pod per file)")
	flag.StringVar(&o.endpoint, "runtime-endpoint", "", "CRI socket (unix:///path); empty runs the built-in fakecri")
	flag.StringVar(&o.listen, "listen", DefaultListen, "address of the node server (/healthz, /pods, /metrics, /containerLogs, /exec...)")
	flag.StringVar(&o.nodeName, "node-name", "", "node name (default: the host name)")
	flag.StringVar(&o.logsDir, "pod-logs-dir", "", "pod log directory (default: /var/log/pods on a real runtime, a temporary directory on fakecri)")
	flag.StringVar(&o.podsDir, "pods-dir", "", "per-pod state directory (default: /var/lib/nodekit/pods on a real runtime, a temporary directory on fakecri)")
	flag.DurationVar(&o.relist, "relist-period", time.Second, "how often the runtime is relisted")
	flag.StringVar(&o.profiling, "profiling", "", "serve Go's /debug/pprof on this loopback address (off when empty)")
	flag.IntVar(&o.verbosity, "v", 0, "log verbosity")
	flag.BoolVar(&o.quiet, "quiet", false, "do not print the pod table")
	flag.BoolVar(&o.evented, "evented-pleg", true, "follow the runtime's container event stream (relisting when it has none)")
	flag.Parse()
	sampleAllocations(o.profiling != "")
	if p := gcPercent(os.Getenv); p >= 0 {
		debug.SetGCPercent(p)
	}
	if n := maxProcs(os.Getenv); n > 0 {
		goruntime.GOMAXPROCS(n)
	}
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "standalone:", err)
		os.Exit(1)
	}
}

// sampleAllocations leaves Go's sampling of allocations for heap
// profiles on only when profiling is: the profiling server's heap
// profiles are its only reader, and the samples' records stay in memory
// for the life of the process.
func sampleAllocations(profiling bool) {
	if !profiling {
		goruntime.MemProfileRate = 0
	}
}

// gcPercent returns the GC percentage the command sets: DefaultGCPercent,
// or -1 when the environment sets GOGC, which Go has then applied.
func gcPercent(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		return -1
	}
	return DefaultGCPercent
}

// maxProcs returns the GOMAXPROCS the command sets: DefaultMaxProcs, or
// 0 (leave it) when the environment sets GOMAXPROCS, which Go has then
// applied (GOMAXPROCS=0 or a value Go ignores leaves Go's default).
func maxProcs(getenv func(string) string) int {
	if getenv("GOMAXPROCS") != "" {
		return 0
	}
	return DefaultMaxProcs
}

// stopSignals are the signals that stop the command cleanly. SIGHUP is
// one: a closed terminal or a supervisor's hang-up must not kill the agent
// in the middle of a sync.
func stopSignals() []os.Signal { return []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} }

// signalContext is cancelled by the first of stopSignals.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), stopSignals()...)
}

func run(ctx context.Context, o options, out, errOut io.Writer) error {
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	log := funcr.New(func(prefix, args string) {
		fmt.Fprintln(errOut, time.Now().Format("15:04:05.000"), prefix, args)
	}, funcr.Options{Verbosity: o.verbosity})
	if o.nodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		o.nodeName = strings.ToLower(h)
	}
	cfg := agent.Config{NodeName: o.nodeName, Listen: o.listen, Logger: log, NodeIPs: []string{"127.0.0.1"}, RelistPeriod: o.relist, EventedPLEG: o.evented}
	if o.endpoint == "" {
		fake, err := fakecri.New(fakecri.Config{})
		if err != nil {
			return err
		}
		cfg.RuntimeService, cfg.ImageService = fake, fake
		// fakecri's streaming server, for the node server's exec, attach
		// and port-forward, on a loopback port of its own.
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		streamer, err := fake.NewStreamingServer(lis)
		if err != nil {
			lis.Close()
			return err
		}
		streamCtx, stopStreaming := context.WithCancel(ctx)
		streamDone := make(chan error, 1)
		go func() { streamDone <- streamer.Run(streamCtx) }()
		defer func() { stopStreaming(); <-streamDone }()
		if o.logsDir == "" {
			dir, err := os.MkdirTemp("", "nodekit-standalone-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			o.logsDir = filepath.Join(dir, "logs")
			cfg.CRI.PodsDir = filepath.Join(dir, "pods")
		}
		fmt.Fprintln(out, "runtime: built-in fakecri")
	} else {
		client, err := criclient.DialWait(ctx, o.endpoint, o.clock, log)
		if err != nil {
			if ctx.Err() != nil { // stopped while waiting: a clean stop
				fmt.Fprintln(out, "stopped while waiting for the runtime")
				return nil
			}
			return err
		}
		defer client.Close(context.Background())
		cfg.RuntimeService, cfg.ImageService = client, client
		fmt.Fprintf(out, "runtime: %s %s at %s\n", client.RuntimeName(), client.RuntimeVersion(), o.endpoint)
	}
	cfg.CRI.PodLogsDir = o.logsDir
	if o.podsDir != "" {
		cfg.CRI.PodsDir = o.podsDir
	}
	if abs, err := filepath.Abs(o.manifests); err == nil {
		o.manifests = abs
	}
	src, err := podsource.NewFile(podsource.FileConfig{Dir: o.manifests, NodeName: o.nodeName, Logger: log.WithName("file"),
		Events: func(_ *v1.Pod, typ, reason, msg string) {
			log.Info("manifest event", "type", typ, "reason", reason, "message", msg)
		}})
	if err != nil {
		return err
	}
	cfg.Sources = []podsource.Source{src}
	// /metrics carries the Go runtime's and the process's figures beside
	// the agent's, as the kubelet's does (go_gc_duration_seconds,
	// go_memstats_alloc_bytes_total, process_resident_memory_bytes...).
	cfg.Registry = prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := cfg.Registry.Register(c); err != nil {
			return err
		}
	}
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	if o.profiling != "" {
		stopProfiling, err := serveProfiling(o.profiling)
		if err != nil {
			return err
		}
		defer stopProfiling()
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	addr := a.Addr()
	if addr == "" && o.listen != "" {
		return <-done // Run could not listen; its error names the address
	}
	fmt.Fprintf(out, "node %s, manifests %s, serving http://%s/pods\n", o.nodeName, o.manifests, addr)
	if !o.quiet {
		go printTable(ctx, a, out)
	}
	err = <-done
	fmt.Fprintln(out, "stopped; pods are left running in the runtime")
	return err
}

// profilingServer serves Go's /debug/pprof handlers from its own mux
// (never http.DefaultServeMux), GET only but for symbol lookups, with
// bounded reads and idle time, a 1 MiB body limit, and a write timeout
// of 2 minutes: pprof refuses a profile as long as the write timeout, so
// the default 30-second CPU profile fits with room to spare.
func profilingServer() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return &http.Server{
		Handler:           http.MaxBytesHandler(mux, 1<<20),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// serveProfiling listens on addr, which must be a loopback address, and
// serves profilingServer there until the returned stop is called.
func serveProfiling(addr string) (stop func(), err error) {
	if err := loopback(addr); err != nil {
		return nil, fmt.Errorf("--profiling: %w", err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--profiling: %w", err)
	}
	srv := profilingServer()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis) // ends with ErrServerClosed
	}()
	return func() {
		_ = srv.Close()
		<-served
	}, nil
}

// loopback refuses an address whose host is not a loopback IP or
// "localhost".
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s is not a loopback address", addr)
}

// printTable prints the pods whenever the table changes. It redraws when
// the agent signals a change, at most every 250 ms (a burst of changes
// makes one redraw when the gap is over), and does nothing in between:
// an idle agent costs it no wake-up.
func printTable(ctx context.Context, a *agent.Agent, out io.Writer) {
	const gap = 250 * time.Millisecond
	changes, cancel := a.PodChanges()
	defer cancel()
	last, drawn := "", time.Time{}
	draw := func() {
		drawn = time.Now()
		if table := render(a.Pods()); table != last {
			last = table
			fmt.Fprintf(out, "\n%s %s", drawn.Format("15:04:05"), table)
		}
	}
	draw()
	var due <-chan time.Time // set while a redraw waits for the gap to pass
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
			if due != nil {
				continue // the pending redraw will show this change too
			}
			if wait := gap - time.Since(drawn); wait > 0 {
				due = time.After(wait)
				continue
			}
			draw()
		case <-due:
			due = nil
			draw()
		}
	}
}

func render(pods []*v1.Pod) string {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name })
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tNAME\tPHASE\tREADY\tRESTARTS\tSTATUS\tIP")
	for _, p := range pods {
		ready, restarts := 0, int32(0)
		detail := ""
		for _, c := range p.Status.ContainerStatuses {
			if c.Ready {
				ready++
			}
			restarts += c.RestartCount
			if c.State.Waiting != nil && detail == "" {
				detail = c.State.Waiting.Reason
			}
			if c.State.Terminated != nil && detail == "" {
				detail = fmt.Sprintf("%s (exit %d)", c.State.Terminated.Reason, c.State.Terminated.ExitCode)
			}
		}
		phase := string(p.Status.Phase)
		if phase == "" {
			phase = "Pending"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", p.Namespace, p.Name, phase, ready, len(p.Spec.Containers), restarts, detail, p.Status.PodIP)
	}
	w.Flush()
	return b.String()
}
