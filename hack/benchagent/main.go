// Command benchagent measures the standalone agent on fakecri served over
// a unix socket, so the agent pays real gRPC costs:
//
//	go run ./hack/benchagent -pods 100,1000 -idle 60s
//
// For each PLEG kind and pod count it writes that many one-container
// static pod manifests, starts examples/fakecri and examples/standalone as
// separate processes (the agent with its live pod table on, output
// discarded, as people run it; -table=false passes --quiet), and prints a
// Markdown table, one row per run, of what it read from /proc/PID of the
// agent:
//
//   - to Running: wall time from the agent's start until /pods shows every
//     pod Running (polled every 200 ms, so ±200 ms);
//   - CPU to Running: the agent's utime+stime until then (/proc/PID/stat,
//     10 ms ticks);
//   - idle CPU: the CPU time the agent's threads ran during the idle window
//     (-idle long, starting -settle, 12 s, and 2 s more after all pods
//     run: past the first log rotation check, 10 s after the start, which
//     asks the runtime once for each container's log path, and the first
//     read of /metrics), as a share of one core:
//     the sum over /proc/PID/task/*/schedstat of the nanoseconds run,
//     which the scheduler counts exactly (utime and stime are sampled at
//     the tick and miss short wake-ups);
//   - wake-ups/s: how often the agent's threads were put on a CPU during
//     the idle window, per second (the same files' run counts);
//   - allocated and GCs/min: what the agent's Go heap allocated per
//     second and how many garbage collections it made per minute over
//     the idle window, from go_memstats_alloc_bytes_total and the count
//     of go_gc_duration_seconds on its /metrics, read just before and
//     just after the window, after a first read 2 s before it that
//     leaves the Go collector's first use out (what the read before the
//     window allocates once it has the figures counts in);
//   - peak RSS: VmHWM, the agent's resident set high-water mark from its
//     start until the idle window (start-up and settling included), read
//     before the first /metrics read, which would add its own memory.
//
// It builds both as README.md recommends for a small node, statically
// (CGO_ENABLED=0) and with -tags grpcnotrace, which leaves gRPC's
// golang.org/x/net/trace out; -cgo and -tags build otherwise (-tags ""
// for none). The header gives the build, the agent's size and its GOGC:
// the standalone's default (50) unless GOGC is set in the environment,
// which the agent inherits (GOGC=100 for Go's default).
//
// -procs N runs the agent with GOMAXPROCS=N (the header says which);
// without it the agent runs with the standalone's default, 1, unless
// GOMAXPROCS is set in the environment. With fewer Go processors than
// CPUs, a goroutine that readies another wakes no second thread to run
// it; compare a run with -procs set to the CPUs (Go's default) beside one
// without to see what that saves an idle agent.
//
// -profile FILE writes a CPU profile of the agent (first run only):
// -profile-idle takes it over the idle window (that run's idle figures
// then include the profiler's own cost), otherwise 20 s from
// -profile-delay after the start. -trace FILE writes an execution trace
// of the agent over the first run's idle window (go tool trace FILE): at
// idle it shows every wake-up and what it ran, which a 100 Hz CPU profile
// samples too rarely to see.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
)

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// Flags read by measure.
var (
	settle       = 12 * time.Second
	profileDelay = time.Second
	profileIdle  bool
	traceFile    string
	table        = true
	procs        int
)

func main() {
	podsFlag := flag.String("pods", "100,1000", "comma-separated pod counts")
	idle := flag.Duration("idle", 60*time.Second, "how long to measure idle CPU after the pods run")
	relist := flag.String("relist", "", "passed to the agent as --relist-period when set")
	profile := flag.String("profile", "", "write a CPU profile of the agent to this file (first run only)")
	plegs := flag.String("pleg", "generic,evented", "comma-separated PLEG kinds to measure")
	flag.DurationVar(&profileDelay, "profile-delay", time.Second, "when the 20s -profile window starts after the agent")
	flag.BoolVar(&profileIdle, "profile-idle", false, "take the -profile over the idle window instead")
	flag.StringVar(&traceFile, "trace", "", "write an execution trace of the agent over the idle window to this file (first run only)")
	flag.BoolVar(&table, "table", true, "run the agent with its live pod table (false: --quiet)")
	flag.DurationVar(&settle, "settle", 12*time.Second, "how long after all pods run the idle window starts")
	flag.IntVar(&procs, "procs", 0, "run the agent with GOMAXPROCS set to this (0: as the environment says, else the standalone's default, 1)")
	tags := flag.String("tags", "grpcnotrace", "build tags of the agent and fakecri")
	cgo := flag.Bool("cgo", false, "build with cgo (dynamically linked against libc)")
	flag.Parse()
	work, err := os.MkdirTemp("", "nodekit-bench-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(work)
	cgoEnv := "CGO_ENABLED=0"
	if *cgo {
		cgoEnv = "CGO_ENABLED=1"
	}
	build := fmt.Sprintf("%s go build -tags %q", cgoEnv, *tags)
	var size int64
	for _, b := range []string{"fakecri", "standalone"} {
		cmd := exec.Command("go", "build", "-tags", *tags, "-o", filepath.Join(work, b), "./examples/"+b)
		cmd.Env = append(os.Environ(), cgoEnv)
		if out, err := cmd.CombinedOutput(); err != nil {
			fail(fmt.Errorf("build %s: %v\n%s", b, err, out))
		}
		if info, err := os.Stat(filepath.Join(work, b)); err == nil {
			size = info.Size()
		}
	}
	commit, _ := exec.Command("git", "log", "-1", "--format=%h %s").Output()
	fmt.Printf("commit %s", commit)
	agentProcs := "1 (the standalone's default)"
	if procs > 0 {
		agentProcs = fmt.Sprint(procs)
	} else if v := os.Getenv("GOMAXPROCS"); v != "" {
		agentProcs = v + " (from the environment)"
	}
	gogc := "50 (the standalone's default)"
	if v := os.Getenv("GOGC"); v != "" {
		gogc = v + " (from the environment)"
	}
	fmt.Printf("agent built with %s, %.1f MB; agent GOGC %s\n", build, float64(size)/1e6, gogc)
	fmt.Printf("idle window %s, live table %v, %d CPUs, agent GOMAXPROCS %s\n\n", *idle, table, goruntime.NumCPU(), agentProcs)
	fmt.Println("| PLEG | pods | to Running | CPU to Running | idle CPU (% of a core) | wake-ups/s idle | allocated idle | GCs/min idle | peak RSS |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, kind := range strings.Split(*plegs, ",") {
		for _, s := range strings.Split(*podsFlag, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n <= 0 {
				fail(fmt.Errorf("bad pod count %q", s))
			}
			r, err := measure(work, n, *idle, *relist, *profile, kind == "evented")
			*profile = ""
			traceFile = ""
			if err != nil {
				fail(err)
			}
			fmt.Printf("| %s | %d | %s | %.2f s | %.3f %% | %.1f | %.0f KB/s | %.1f | %.1f MiB |\n", kind, n, r.toRunning.Round(10*time.Millisecond), r.cpu, r.idlePercent, r.wakeups, r.allocRate, r.gcs, r.peakRSS)
		}
	}
}

type result struct {
	toRunning   time.Duration
	cpu         float64
	peakRSS     float64
	idlePercent float64
	wakeups     float64
	// allocRate (KB/s) and gcs (a minute) over the idle window, from the
	// agent's /metrics.
	allocRate, gcs float64
}

func measure(work string, n int, idle time.Duration, relist, profile string, evented bool) (result, error) {
	dir := filepath.Join(work, fmt.Sprint("run-", n, "-", evented))
	manifests := filepath.Join(dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return result{}, err
	}
	for i := 0; i < n; i++ {
		doc := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: pod-%04d}\nspec:\n  containers: [{name: main, image: \"busybox:1.36\"}]\n", i)
		if err := os.WriteFile(filepath.Join(manifests, fmt.Sprintf("pod-%04d.yaml", i)), []byte(doc), 0o644); err != nil {
			return result{}, err
		}
	}
	sock := filepath.Join(dir, "fakecri.sock")
	fake := exec.Command(filepath.Join(work, "fakecri"), "--listen", "unix://"+sock, "--pod-cidr", "127.64.0.0/10")
	if err := fake.Start(); err != nil {
		return result{}, err
	}
	defer stop(fake)
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	addr := lis.Addr().String()
	lis.Close()
	args := []string{"--runtime-endpoint", "unix://" + sock, "--manifests", manifests, "--listen", addr, "--node-name", "bench",
		"--pod-logs-dir", filepath.Join(dir, "logs"), "--pods-dir", filepath.Join(dir, "pods"), fmt.Sprintf("--evented-pleg=%v", evented)}
	if !table {
		args = append(args, "--quiet")
	}
	if relist != "" {
		args = append(args, "--relist-period", relist)
	}
	fetch := func(what, file string, seconds int) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:16060/debug/pprof/%s?seconds=%d", what, seconds))
		if err != nil {
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(file)
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}
	startProfile := func(seconds int) {}
	if profile != "" || traceFile != "" {
		args = append(args, "--profiling", "127.0.0.1:16060")
	}
	if profile != "" {
		startProfile = func(seconds int) { fetch("profile", profile, seconds) }
	}
	agent := exec.Command(filepath.Join(work, "standalone"), args...) // output to /dev/null
	agent.Env = os.Environ()
	if procs > 0 {
		agent.Env = append(agent.Env, fmt.Sprintf("GOMAXPROCS=%d", procs))
	}
	start := time.Now()
	if err := agent.Start(); err != nil {
		return result{}, err
	}
	defer stop(agent)
	if profile != "" && !profileIdle {
		go func() { time.Sleep(profileDelay); startProfile(20) }()
	}
	pid := agent.Process.Pid
	deadline := start.Add(5 * time.Minute)
	for {
		if running(addr) == n {
			break
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("%d pods: not all Running after 5 minutes", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r := result{toRunning: time.Since(start)}
	r.cpu = cpuSeconds(pid)
	time.Sleep(settle) // the start-up's last work: status pushes, the first log check
	if profile != "" && profileIdle {
		go startProfile(int(idle.Seconds()) - 5) // done before the agent stops
	}
	if traceFile != "" {
		go fetch("trace", traceFile, int(idle.Seconds())-5) // done before the agent stops
	}
	// The peak is read before /metrics is, whose first read (the Go
	// collector's first use, about a megabyte) would add to it; that
	// first read is a warm-up, 2 s before the window. The reads are
	// outside the schedstat window; what the one before it allocates
	// once it has the figures is in the allocation rate.
	r.peakRSS = peakRSS(pid)
	if _, _, err := goFigures(addr); err != nil {
		return result{}, err
	}
	time.Sleep(2 * time.Second)
	allocBefore, gcsBefore, err := goFigures(addr)
	if err != nil {
		return result{}, err
	}
	ranBefore, runsBefore, err := schedstat(pid)
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	time.Sleep(idle)
	ranAfter, runsAfter, err := schedstat(pid)
	if err != nil {
		return result{}, err
	}
	window := time.Since(t0)
	allocAfter, gcsAfter, err := goFigures(addr)
	if err != nil {
		return result{}, err
	}
	r.idlePercent = float64(ranAfter-ranBefore) / float64(window) * 100
	r.wakeups = float64(runsAfter-runsBefore) / window.Seconds()
	r.allocRate = (allocAfter - allocBefore) / 1000 / window.Seconds()
	r.gcs = (gcsAfter - gcsBefore) / window.Minutes()
	return r, nil
}

// schedstat sums, over the threads of a process, the nanoseconds they ran
// and the number of times they were put on a CPU (/proc/PID/task/*/schedstat).
// A thread that exits during the window takes its share with it; the Go
// runtime keeps its threads.
func schedstat(pid int) (ran time.Duration, runs uint64, err error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, 0, fmt.Errorf("no /proc/%d/task/*/schedstat (needs Linux with schedstats): %v", pid, err)
	}
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		fields := strings.Fields(string(data))
		if len(fields) < 3 {
			return 0, 0, fmt.Errorf("%s: %q", f, data)
		}
		ns, _ := strconv.ParseInt(fields[0], 10, 64)
		n, _ := strconv.ParseUint(fields[2], 10, 64)
		ran += time.Duration(ns)
		runs += n
	}
	return ran, runs, nil
}

func stop(c *exec.Cmd) {
	_ = c.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}

// goFigures reads from the agent's /metrics the bytes its Go heap has
// allocated (go_memstats_alloc_bytes_total) and the garbage collections
// it has made (the count of go_gc_duration_seconds).
func goFigures(addr string) (alloc, gcs float64, err error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, 0, fmt.Errorf("%s/metrics: %w", addr, err)
	}
	allocs, collections := fams["go_memstats_alloc_bytes_total"], fams["go_gc_duration_seconds"]
	if len(allocs.GetMetric()) != 1 || len(collections.GetMetric()) != 1 {
		return 0, 0, fmt.Errorf("%s/metrics has no go_memstats_alloc_bytes_total or go_gc_duration_seconds", addr)
	}
	return allocs.GetMetric()[0].GetCounter().GetValue(), float64(collections.GetMetric()[0].GetSummary().GetSampleCount()), nil
}

func running(addr string) int {
	resp, err := http.Get("http://" + addr + "/pods")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var list v1.PodList
	if json.NewDecoder(resp.Body).Decode(&list) != nil {
		return 0
	}
	n := 0
	for _, p := range list.Items {
		if p.Status.Phase == v1.PodRunning {
			n++
		}
	}
	return n
}

// cpuSeconds is utime+stime of a process, from /proc/PID/stat.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks
}

// peakRSS is VmHWM in MiB.
func peakRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchagent:", err)
	os.Exit(1)
}
