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

// BenchmarkDispatch measures UpdatePod → SyncPod throughput over 1000 pod
// workers: each op is one update delivered to a worker and synced.
func BenchmarkDispatch(b *testing.B) {
	c := counter{synced: make(chan types.UID, 1024)}
	pw, err := podworkers.New(podworkers.Config{Handler: c, Cache: emptyCache{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- pw.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	const pods = 1000
	list := make([]*v1.Pod, pods)
	for i := range list {
		list[i] = pod(fmt.Sprint("p", i), "v1")
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() {
		for i := 0; i < b.N; i++ {
			pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: list[i%pods]})
		}
	}()
	// Updates to a busy worker coalesce, so count syncs until the last
	// pods have been seen at least once per round.
	synced := 0
	want := min(b.N, pods)
	for synced < want {
		<-c.synced
		synced++
	}
	for {
		select {
		case <-c.synced:
			synced++
			continue
		case <-time.After(20 * time.Millisecond):
		}
		break
	}
	b.ReportMetric(float64(synced)/time.Since(start).Seconds(), "syncs/s")
}
