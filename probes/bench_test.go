package probes_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync/atomic"
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
// with a 10 s exec readiness probe. One op is one 10 s period: every
// container probed once through ExecSync. ns/op divided by 10 s is the
// share of a core the probes take; it also reports goroutines per worker.
func BenchmarkReadiness1000(b *testing.B) {
	const n = 1000
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
	var probed atomic.Int64
	h := &probes.Handlers{Exec: fake}
	m, err := probes.New(probes.Config{
		Prober: probes.ProberFunc(func(ctx context.Context, t probes.Target, p *v1.Probe, d time.Duration) (probes.Result, string, error) {
			defer probed.Add(1)
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
	for goruntime.NumGoroutine()-before < n {
		goruntime.Gosched()
	}
	perWorker := float64(goruntime.NumGoroutine()-before) / n
	// A round steps the clock a second at a time until every container has
	// been probed once more (workers whose timers were set late catch up).
	round := func(want int64) {
		for probed.Load() < want {
			clk.Step(time.Second)
			for i := 0; i < 100 && probed.Load() < want; i++ {
				goruntime.Gosched()
			}
		}
	}
	round(n) // the jittered first probes
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round(int64(n * (i + 2)))
	}
	b.StopTimer()
	b.ReportMetric(perWorker, "goroutines/worker")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(10*time.Second)*100, "%core")
}
