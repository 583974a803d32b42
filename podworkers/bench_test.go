package podworkers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
)

// counter is a SyncHandler that counts syncs.
type counter struct{ synced chan types.UID }

func (c counter) SyncPod(_ context.Context, _ podworkers.UpdateType, pod *v1.Pod, _ *runtime.PodStatus) (bool, error) {
	c.synced <- pod.UID
	return false, nil
}
func (counter) SyncTerminatingPod(context.Context, *v1.Pod, *runtime.PodStatus, int64) error {
	return nil
}
func (counter) SyncTerminatingRuntimePod(context.Context, *runtime.Pod) error        { return nil }
func (counter) SyncTerminatedPod(context.Context, *v1.Pod, *runtime.PodStatus) error { return nil }

const benchPods = 1000

func benchPodList() []*v1.Pod {
	list := make([]*v1.Pod, benchPods)
	for i := range list {
		list[i] = pod(fmt.Sprint("p", i), "v1")
	}
	return list
}

// BenchmarkDispatch measures UpdatePod → SyncPod over 1000 running pod
// workers: each op is one update delivered to a worker and one sync run.
// Updates go out in rounds of at most one per pod, and a round starts
// once every sync of the previous one ran, so no update coalesces with
// another and every op is a sync actually run. The workers are created
// before the timer starts.
func BenchmarkDispatch(b *testing.B) {
	c := counter{synced: make(chan types.UID, benchPods)}
	pw, err := podworkers.New(podworkers.Config{Handler: c, Cache: emptyCache{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- pw.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	list := benchPodList()
	for _, p := range list {
		pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
	}
	for range list {
		<-c.synced
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(b.N-done, benchPods)
		for i := 0; i < n; i++ {
			pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: list[i]})
		}
		for i := 0; i < n; i++ {
			<-c.synced
		}
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "syncs/s")
}

// BenchmarkMachineStep measures the state machine alone over 1000 pods:
// each op is one update, the step it asks for, and that step's end, with
// no goroutine, lock or clock.
func BenchmarkMachineStep(b *testing.B) {
	m := podworkers.NewMachine(podworkers.MachineConfig{})
	list := benchPodList()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range list {
		m.Update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p}, now)
		m.Next(p.UID, now)
		m.Finish(p.UID, podworkers.StepResult{}, now)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := list[i%benchPods]
		m.Update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p}, now)
		if _, ok := m.Next(p.UID, now); !ok {
			b.Fatal("no step")
		}
		m.Finish(p.UID, podworkers.StepResult{}, now)
	}
}
