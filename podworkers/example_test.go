package podworkers_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
)

// printer is a SyncHandler that prints what it is asked to do.
type printer struct{ synced, done chan struct{} }

func (p printer) SyncPod(_ context.Context, t podworkers.UpdateType, pod *v1.Pod, _ *runtime.PodStatus) (bool, error) {
	fmt.Println("sync", t, pod.Name)
	p.synced <- struct{}{}
	return false, nil
}

func (printer) SyncTerminatingPod(_ context.Context, pod *v1.Pod, _ *runtime.PodStatus, grace int64) error {
	fmt.Println("terminating", pod.Name, "grace", grace)
	return nil
}

func (printer) SyncTerminatingRuntimePod(context.Context, *runtime.Pod) error { return nil }

func (p printer) SyncTerminatedPod(_ context.Context, pod *v1.Pod, _ *runtime.PodStatus) error {
	fmt.Println("terminated", pod.Name)
	close(p.done)
	return nil
}

type emptyCache struct{}

func (emptyCache) GetNewerThan(_ context.Context, uid types.UID, _ time.Time) (*runtime.PodStatus, error) {
	return &runtime.PodStatus{ID: uid}, nil
}

func Example() {
	h := printer{synced: make(chan struct{}, 1), done: make(chan struct{})}
	pw, _ := podworkers.New(podworkers.Config{Handler: h, Cache: emptyCache{}})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- pw.Run(ctx) }()

	grace := int64(5)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace}}
	pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod})
	<-h.synced
	pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: pod})
	<-h.done
	cancel()
	<-stopped
	// Output:
	// sync create web
	// terminating web grace 5
	// terminated web
}
