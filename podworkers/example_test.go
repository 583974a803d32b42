package podworkers_test

import (
	"context"
	"errors"
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

// The state machine driven by hand: no goroutine, no clock, no handler.
// The caller runs each step it hands out and reports how it ended.
func ExampleMachine() {
	m := podworkers.NewMachine(podworkers.MachineConfig{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"}}
	m.Update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod}, now)
	step, _ := m.Next(pod.UID, now)
	fmt.Println(step.State, step.UpdateType)
	m.Finish(pod.UID, podworkers.StepResult{Err: errors.New("image pull failed")}, now)
	fmt.Println("due in 9s:", len(m.Due(now.Add(9*time.Second))), "due in 10s:", len(m.Due(now.Add(10*time.Second))))

	m.Update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: pod}, now)
	step, _ = m.Next(pod.UID, now)
	fmt.Println(step.State, "grace", step.GracePeriod)
	m.Finish(pod.UID, podworkers.StepResult{}, now)
	step, _ = m.Next(pod.UID, now)
	fmt.Println(step.State)
	eff := m.Finish(pod.UID, podworkers.StepResult{}, now)
	fmt.Println("finished:", eff.Finished)
	// Output:
	// syncing create
	// due in 9s: 0 due in 10s: 1
	// terminating grace 30
	// terminated
	// finished: true
}
