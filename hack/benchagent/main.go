// Command benchagent measures the standalone agent on fakecri served over
// a unix socket, so the agent pays real gRPC costs:
//
//	go run ./hack/benchagent -pods 100,1000 -idle 60s
//
// For each pod count it writes that many one-container static pod
// manifests, starts examples/fakecri and examples/standalone as separate
// processes, and reports the time from the agent's start until every pod
// is Running (read from /pods), the agent's CPU seconds and peak RSS until
// then, and its CPU use while idle for -idle afterwards, from /proc.
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
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
)

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// profileDelay is when the CPU profile starts after the agent (-profile-idle moves it past the start).
var profileDelay = time.Second

func main() {
	podsFlag := flag.String("pods", "100,1000", "comma-separated pod counts")
	idle := flag.Duration("idle", 60*time.Second, "how long to measure idle CPU after the pods run")
	relist := flag.String("relist", "", "passed to the agent as --relist-period when set")
	profile := flag.String("profile", "", "write a 20s CPU profile of the agent's start to this file (first pod count only)")
	plegs := flag.String("pleg", "generic,evented", "comma-separated PLEG kinds to measure")
	flag.DurationVar(&profileDelay, "profile-delay", time.Second, "when the -profile window starts after the agent")
	flag.Parse()
	work, err := os.MkdirTemp("", "nodekit-bench-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(work)
	for _, b := range []string{"fakecri", "standalone"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(work, b), "./examples/"+b).CombinedOutput(); err != nil {
			fail(fmt.Errorf("build %s: %v\n%s", b, err, out))
		}
	}
	fmt.Printf("%-8s %-6s %-12s %-14s %-10s %-10s %s\n", "pleg", "pods", "to-running", "cpu-to-running", "peak-rss", "idle-cpu", "idle-window")
	for _, kind := range strings.Split(*plegs, ",") {
		for _, s := range strings.Split(*podsFlag, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n <= 0 {
				fail(fmt.Errorf("bad pod count %q", s))
			}
			r, err := measure(work, n, *idle, *relist, *profile, kind == "evented")
			*profile = ""
			if err != nil {
				fail(err)
			}
			fmt.Printf("%-8s %-6d %-12s %-14s %-10s %-10s %s\n", kind, n, r.toRunning.Round(time.Millisecond), fmt.Sprintf("%.2fs", r.cpu), fmt.Sprintf("%.1fMiB", r.peakRSS), fmt.Sprintf("%.2f%%", r.idlePercent), *idle)
		}
	}
}

type result struct {
	toRunning   time.Duration
	cpu         float64
	peakRSS     float64
	idlePercent float64
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
		"--pod-logs-dir", filepath.Join(dir, "logs"), "--pods-dir", filepath.Join(dir, "pods"), "--quiet", fmt.Sprintf("--evented-pleg=%v", evented)}
	if relist != "" {
		args = append(args, "--relist-period", relist)
	}
	if profile != "" {
		args = append(args, "--profiling", "127.0.0.1:16060")
		go func() {
			time.Sleep(profileDelay)
			resp, err := http.Get("http://127.0.0.1:16060/debug/pprof/profile?seconds=20")
			if err != nil {
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(profile)
			if err != nil {
				return
			}
			defer f.Close()
			_, _ = io.Copy(f, resp.Body)
		}()
	}
	agent := exec.Command(filepath.Join(work, "standalone"), args...)
	start := time.Now()
	if err := agent.Start(); err != nil {
		return result{}, err
	}
	defer stop(agent)
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
	time.Sleep(2 * time.Second) // let the last status pushes settle
	before := cpuSeconds(pid)
	time.Sleep(idle)
	r.idlePercent = (cpuSeconds(pid) - before) / idle.Seconds() * 100
	r.peakRSS = peakRSS(pid)
	return r, nil
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
