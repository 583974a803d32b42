package probes_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/probes"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// BenchmarkReadiness1000 probes 1000 running containers on fakecri, each
// with a 10 s exec readiness probe. One op is one 10 s period on the fake
// clock: every container probed once through ExecSync. %core is the CPU
// time (user + system, getrusage RUSAGE_SELF: every goroutine of the
// process, the workers, fakecri's ExecSync, the fake clock and the
// garbage collector) one period costs, divided by the 10 s the period
// lasts in real time: the share of a core the probes would take. ns/op is
// the wall time a period takes to run here. It also reports goroutines
// per worker.
//
//	go test -run '^$' -bench Readiness1000 -benchmem ./probes/
func BenchmarkReadiness1000(b *testing.B) {
	const (
		n      = 1000
		period = 10 * time.Second
	)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fake, _ := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}, PodCIDR: "127.64.0.0/10"})
	statuses := map[types.UID]v1.PodStatus{}
	var pods []*v1.Pod
	for i := 0; i < n; i++ {
		uid := types.UID(fmt.Sprint("uid-", i))
		sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprint("p", i), Namespace: "bench", Uid: string(uid)}}
		sb, _ := fake.RunPodSandbox(ctx, sbCfg, "")
		id, _ := fake.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}, sbCfg)
		fake.StartContainer(ctx, id)
		statuses[uid] = v1.PodStatus{PodIP: "127.64.0.1", ContainerStatuses: []v1.ContainerStatus{{Name: "c", ContainerID: "fakecri://" + id,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(clk.Now())}}}}}
		pods = append(pods, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: "bench", UID: uid},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", ReadinessProbe: &v1.Probe{
				ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 10, TimeoutSeconds: 1}}}}})
	}
	// probed counts the probes; reached is signalled when the count hits
	// want, so the driver blocks instead of spinning (its CPU would count).
	var (
		mu      sync.Mutex
		probed  int64
		want    int64
		reached = make(chan struct{}, 1)
	)
	h := &probes.Handlers{Exec: fake}
	m, err := probes.New(probes.Config{
		Prober: probes.ProberFunc(func(ctx context.Context, t probes.Target, p *v1.Probe, d time.Duration) (probes.Result, string, error) {
			defer func() {
				mu.Lock()
				defer mu.Unlock()
				if probed++; probed == want {
					reached <- struct{}{}
				}
			}()
			return h.Probe(ctx, t, p, d)
		}),
		Status: func(uid types.UID) (v1.PodStatus, bool) { s, ok := statuses[uid]; return s, ok },
		Clock:  clk,
		Jitter: func(p time.Duration) time.Duration { return time.Duration(int64(p) / 2) },
	})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- m.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for {
			select {
			case <-m.Updates():
			case <-runCtx.Done():
				return
			}
		}
	}()
	defer func() { cancel(); <-drained }()
	before := goruntime.NumGoroutine()
	for _, p := range pods {
		m.AddPod(p)
	}
	// idle returns once every worker waits on its timer: then a step of
	// the clock fires each exactly once. It polls with short sleeps
	// rather than spinning, so the driver adds little CPU time.
	idle := func() {
		for deadline := time.Now().Add(time.Minute); clk.Waiters() < n; time.Sleep(50 * time.Microsecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d workers waiting on the clock after a minute", clk.Waiters(), n)
			}
		}
	}
	idle()
	perWorker := float64(goruntime.NumGoroutine()-before) / n
	// A round waits until every worker is idle, steps the clock to the
	// next probe and waits until every container has been probed once
	// more.
	round := func(step time.Duration, total int64) {
		idle()
		mu.Lock()
		want = total
		mu.Unlock()
		clk.Step(step)
		select {
		case <-reached:
		case <-time.After(time.Minute):
			mu.Lock()
			defer mu.Unlock()
			b.Fatalf("%d of %d probes after a minute", probed, total)
		}
	}
	round(period/2, n) // the jittered first probes
	b.ReportAllocs()
	cpu0, measured := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round(period, int64(n*(i+2)))
	}
	b.StopTimer()
	cpu1, _ := cpuTime()
	b.ReportMetric(perWorker, "goroutines/worker")
	if measured {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N)/float64(period)*100, "%core")
	}
}
