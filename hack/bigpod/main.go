// Command bigpod measures the whole agent (package agent, with the
// runtime/cri runtime) on one pod with many containers, on the in-memory
// fakecri runtime in the same process:
//
//	go run ./hack/bigpod -containers 10000 -pleg generic,evented
//
// or "make bench-bigpod". For each PLEG kind it runs itself as a child
// process that starts fakecri and the agent, sends the pod on a channel
// source, and waits until the runtime runs every container and the
// agent's Pods view shows them all running. It prints the time from the
// pod's arrival to that moment, the child's CPU time (user and system,
// start-up and shut-down included) and its peak RSS (getrusage's
// ru_maxrss). The child holds fakecri's state too, so the figure is an
// upper bound of the agent's own memory. fakecri's record of calls is
// cleared as the run goes, since it is no part of the agent.
// A child that does not finish within -timeout gives up and is reported
// as failed. With -child, -cpuprofile and -memprofile profile one run:
//
//	go run ./hack/bigpod -child evented -cpuprofile cpu.out
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func main() {
	containers := flag.Int("containers", 10000, "containers in the pod")
	plegs := flag.String("pleg", "generic,evented", "comma-separated PLEG kinds to measure")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up on a run after this long")
	child := flag.String("child", "", "internal: run one measurement in this process with this PLEG kind")
	cpuProfile := flag.String("cpuprofile", "", "with -child: write a CPU profile of the run to this file")
	memProfile := flag.String("memprofile", "", "with -child: write a heap profile at the end of the run to this file")
	flag.Parse()
	if *child != "" {
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				fail(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fail(err)
			}
			defer pprof.StopCPUProfile()
		}
		if *memProfile != "" {
			defer func() {
				f, err := os.Create(*memProfile)
				if err == nil {
					pprof.Lookup("allocs").WriteTo(f, 0)
					f.Close()
				}
			}()
		}
		d, err := runOne(*child == "evented", *containers, *timeout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bigpod:", err)
			return
		}
		fmt.Println(d.Seconds())
		return
	}
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	fmt.Printf("%-8s %-11s %-12s %-8s %s\n", "pleg", "containers", "to-running", "cpu", "peak-rss")
	for _, kind := range strings.Split(*plegs, ",") {
		kind = strings.TrimSpace(kind)
		var out bytes.Buffer
		cmd := exec.Command(self, "-child", kind, "-containers", fmt.Sprint(*containers), "-timeout", timeout.String())
		cmd.Stdout = &out
		cmd.Stderr = os.Stderr
		err := cmd.Run()
		rss, cpu := "?", "?"
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = fmt.Sprintf("%.1fMiB", float64(ru.Maxrss)/1024) // KiB on Linux
			cpu = fmt.Sprintf("%.1fs", time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds())
		}
		took := "failed"
		if err == nil {
			if s, perr := strconv.ParseFloat(strings.TrimSpace(out.String()), 64); perr == nil {
				took = fmt.Sprintf("%.2fs", s)
			}
		}
		fmt.Printf("%-8s %-11d %-12s %-8s %s\n", kind, *containers, took, cpu, rss)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bigpod:", err)
	os.Exit(1)
}

func bigPod(n int) *v1.Pod {
	cs := make([]v1.Container, n)
	for i := range cs {
		cs[i] = v1.Container{Name: fmt.Sprintf("c%05d", i), Image: "busybox:1.36", Command: []string{"sleep", "infinity"}}
	}
	grace := int64(1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bigpod", Namespace: "default", UID: "bigpod-uid"},
		Spec:       v1.PodSpec{Containers: cs, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace},
	}
}

// runOne runs the agent until the pod's n containers are all running and
// returns how long that took from the pod's arrival.
func runOne(evented bool, n int, timeout time.Duration) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "nodekit-bigpod-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
	if err != nil {
		return 0, err
	}
	src := podsource.NewChannel("bench", 1)
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{src},
		EventedPLEG: evented, Logger: logr.Discard(),
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
	})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()

	start := time.Now()
	if err := src.Send(ctx, podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{bigPod(n)}}); err != nil {
		return 0, err
	}
	// Poll the runtime, which is cheap, and confirm with the agent's view
	// (a deep copy of the pod) only once the runtime runs them all.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	running := 0
	for {
		select {
		case err := <-done:
			return 0, fmt.Errorf("the agent stopped: %v", err)
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d containers running after %v", running, n, timeout)
		case <-tick.C:
		}
		fake.ResetCalls() // fakecri records every call; the agent does not
		if cs, err := fake.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}); err != nil || len(cs) < n {
			continue
		}
		running = 0
		for _, p := range a.Pods() {
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Running != nil {
					running++
				}
			}
		}
		if running == n {
			return time.Since(start), nil
		}
	}
}
