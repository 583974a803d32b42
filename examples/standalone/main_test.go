package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/syncbuf"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testOptions(t *testing.T) options {
	return options{manifests: t.TempDir(), listen: "127.0.0.1:0", nodeName: "node", relist: time.Second, quiet: true, evented: true}
}

// waitUntil polls cond every 10ms for up to 20s of wall time.
func waitUntil(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s\n%s", what, state())
		}
	}
}

func runAsync(ctx context.Context, o options, out, errOut *syncbuf.Buffer) chan error {
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, out, errOut) }()
	return done
}

func result(t *testing.T, done chan error, errOut *syncbuf.Buffer) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("run did not return within 20s\n%s", errOut)
		return nil
	}
}

func TestAddressInUseEndsRunWithAnErrorNamingIt(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	o := testOptions(t)
	o.listen = taken.Addr().String()
	var out, errOut syncbuf.Buffer
	err = result(t, runAsync(context.Background(), o, &out, &errOut), &errOut)
	if err == nil || !strings.Contains(err.Error(), "listen tcp "+o.listen) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("run() = %v, want an error naming %s and the address in use", err, o.listen)
	}
}

// A runtime whose socket is not there yet is waited for on the clock, and
// used once it answers.
func TestRunWaitsForTheRuntime(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	o := testOptions(t)
	o.endpoint = "unix://" + sock
	clk := clocktesting.NewFakeClock(time.Now())
	o.clock = clk
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := runAsync(ctx, o, &out, &errOut)
	// Three failed attempts, each followed by a back-off on the clock; the
	// runtime comes up during the third.
	waits := func() int {
		return strings.Count(errOut.String(), `"msg"="waiting for the runtime" "endpoint"="`+o.endpoint+`"`)
	}
	for i := range 3 {
		waitUntil(t, "run waits on the clock", func() bool { return waits() == i+1 && clk.HasWaiters() }, errOut.String)
		if i < 2 {
			clk.Step(5 * time.Second)
		}
	}
	if !strings.Contains(errOut.String(), "no such file or directory") {
		t.Errorf("the wait does not log why:\n%s", errOut.String())
	}
	rt, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := fakecri.ListenUnix(o.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopServer := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- fakecri.NewServer(rt, rt).Serve(sctx, lis) }()
	defer func() { stopServer(); <-served }()
	clk.Step(5 * time.Second)
	waitUntil(t, "the agent serves", func() bool { return strings.Contains(out.String(), "serving http://") }, func() string { return out.String() + errOut.String() })
	if got := waits(); got != 3 {
		t.Errorf("%d waits logged, want 3:\n%s", got, errOut.String())
	}
	if !strings.Contains(out.String(), "runtime: fakecri") {
		t.Errorf("the runtime is not the one that came up:\n%s", out.String())
	}
	cancel()
	if err := result(t, done, &errOut); err != nil {
		t.Errorf("run() = %v after a clean stop", err)
	}
}

func TestRunGivesUpOnAnEndpointThatCanNeverWork(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-socket")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := testOptions(t)
	o.endpoint = "unix://" + file
	var out, errOut syncbuf.Buffer
	if err := result(t, runAsync(context.Background(), o, &out, &errOut), &errOut); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("run() = %v, want an error saying it is not a socket", err)
	}
}

// SIGHUP stops the command as SIGTERM does: run returns nil and says the
// pods are left running.
func TestSIGHUPStopsCleanly(t *testing.T) {
	if !slices.Contains(stopSignals(), os.Signal(syscall.SIGHUP)) {
		t.Fatalf("stopSignals() = %v: SIGHUP would kill the process", stopSignals())
	}
	ctx, stop := signalContext()
	defer stop()
	var out, errOut syncbuf.Buffer
	done := runAsync(ctx, testOptions(t), &out, &errOut)
	waitUntil(t, "the agent serves", func() bool { return strings.Contains(out.String(), "serving http://") }, func() string { return out.String() + errOut.String() })
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := result(t, done, &errOut); err != nil {
		t.Errorf("run() = %v after SIGHUP", err)
	}
	if !strings.Contains(out.String(), "stopped; pods are left running") {
		t.Errorf("no clean stop:\n%s", out.String())
	}
}

func TestProfilingServer(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "192.0.2.1:6060"} {
		if _, err := serveProfiling(addr); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("serveProfiling(%q) = %v, want a refusal of a non-loopback address", addr, err)
		}
	}
	srv := profilingServer()
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Errorf("profiling server without bounds: %+v", srv)
	}
	if srv.WriteTimeout <= 30*time.Second {
		t.Errorf("WriteTimeout %s: a 30-second CPU profile would be refused", srv.WriteTimeout)
	}
	h := srv.Handler
	get := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	if rec := get(http.MethodGet, "/debug/pprof/cmdline"); rec.Code != http.StatusOK {
		t.Errorf("GET /debug/pprof/cmdline: %d", rec.Code)
	}
	if rec := get(http.MethodPost, "/debug/pprof/cmdline"); rec.Code != http.StatusMethodNotAllowed || !strings.Contains(rec.Header().Get("Allow"), "GET") {
		t.Errorf("POST /debug/pprof/cmdline: %d, Allow %q; want 405 with Allow", rec.Code, rec.Header().Get("Allow"))
	}
	if rec := get(http.MethodGet, "/debug/pprof/heap"); rec.Code != http.StatusOK {
		t.Errorf("GET /debug/pprof/heap: %d", rec.Code)
	}
	if rec := get(http.MethodGet, "/"); rec.Code != http.StatusNotFound {
		t.Errorf("GET /: %d, want 404 (only /debug/pprof is served)", rec.Code)
	}
}

func TestSampleAllocations(t *testing.T) {
	defer func(rate int) { goruntime.MemProfileRate = rate }(goruntime.MemProfileRate)
	goruntime.MemProfileRate = 512 * 1024
	sampleAllocations(true)
	if goruntime.MemProfileRate != 512*1024 {
		t.Errorf("with profiling: MemProfileRate %d, want Go's %d left alone", goruntime.MemProfileRate, 512*1024)
	}
	sampleAllocations(false)
	if goruntime.MemProfileRate != 0 {
		t.Errorf("without profiling: MemProfileRate %d, want 0 (no sampling)", goruntime.MemProfileRate)
	}
}

func TestGCPercent(t *testing.T) {
	for gogc, want := range map[string]int{"": DefaultGCPercent, "100": -1, "off": -1, "25": -1} {
		getenv := func(k string) string {
			if k == "GOGC" {
				return gogc
			}
			return ""
		}
		if got := gcPercent(getenv); got != want {
			t.Errorf("GOGC=%q: gcPercent %d, want %d", gogc, got, want)
		}
	}
}

func TestMaxProcs(t *testing.T) {
	for env, want := range map[string]int{"": DefaultMaxProcs, "0": 0, "4": 0, "1": 0} {
		getenv := func(k string) string {
			if k == "GOMAXPROCS" {
				return env
			}
			return ""
		}
		if got := maxProcs(getenv); got != want {
			t.Errorf("GOMAXPROCS=%q: maxProcs %d, want %d", env, got, want)
		}
	}
}

// /metrics carries the Go runtime's and the process's figures beside the
// agent's, which hack/benchagent reads.
func TestMetricsCarryGoRuntimeFigures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := runAsync(ctx, testOptions(t), &out, &errOut)
	waitUntil(t, "the agent serves", func() bool { return strings.Contains(out.String(), "serving http://") }, func() string { return out.String() + errOut.String() })
	_, rest, _ := strings.Cut(out.String(), "serving http://")
	addr, _, _ := strings.Cut(rest, "/")
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go_gc_duration_seconds_count ", "go_memstats_alloc_bytes_total ", "go_goroutines ", "process_resident_memory_bytes ", "kubelet_pleg_relist_duration_seconds"} {
		if !strings.Contains(string(body), "\n"+name) {
			t.Errorf("/metrics has no %s:\n%s", name, body)
		}
	}
	cancel()
	if err := result(t, done, &errOut); err != nil {
		t.Errorf("run() = %v after a clean stop", err)
	}
}

// Stopped while it waits for its runtime, the command stops cleanly, as
// it does once running: run returns nil, and main exits 0.
func TestStopWhileWaitingForTheRuntimeIsClean(t *testing.T) {
	o := testOptions(t)
	o.endpoint = "unix://" + filepath.Join(t.TempDir(), "cri.sock")
	clk := clocktesting.NewFakeClock(time.Now())
	o.clock = clk
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := runAsync(ctx, o, &out, &errOut)
	waitUntil(t, "run waits on the clock for the runtime", func() bool {
		return strings.Contains(errOut.String(), `"msg"="waiting for the runtime"`) && clk.HasWaiters()
	}, errOut.String)
	cancel()
	if err := result(t, done, &errOut); err != nil {
		t.Errorf("run() = %v after a stop while waiting for the runtime, want nil", err)
	}
	if !strings.Contains(out.String(), "stopped while waiting for the runtime") {
		t.Errorf("no clean stop:\n%s", out.String())
	}
}
