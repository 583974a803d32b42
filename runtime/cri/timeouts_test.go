package cri_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// realWait bounds how long a test waits, in real time, for what a step of
// the fake clock sets off.
const realWait = 10 * time.Second

// waitForWaiters waits until something waits on clk, failing with what
// after realWait.
func waitForWaiters(t *testing.T, clk *clocktesting.FakeClock, what string) {
	t.Helper()
	deadline := time.Now().Add(realWait)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatalf("nothing waits on the clock: %s", what)
		}
		runtimeGosched()
	}
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(realWait):
		t.Fatalf("%s did not return within %s of real time", what, realWait)
	}
	var zero T
	return zero
}

func TestHungExecPreStopIsCutOffAtTheGracePeriod(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
	withEnv(&pod.Spec.Containers[0], fakecri.EnvExec, `{"drain": {"delay": "1h"}}`)
	h.sync(pod)
	id := h.status(pod).FindContainerStatus("app").ID.ID

	done := make(chan error, 1)
	go func() { done <- h.rt.KillPod(h.ctx, pod, nil, nil) }()
	waitForWaiters(t, h.clock, "the preStop hook")
	h.clock.Step(60 * time.Second)
	if err := receive(t, done, "KillPod with a hung preStop exec"); err != nil {
		t.Fatal(err)
	}
	h.rec.mu.Lock()
	got := h.rec.stops[id]
	h.rec.mu.Unlock()
	if got != 2 {
		t.Errorf("stopped with %ds after the hook used the whole 60 s, want the minimum 2", got)
	}
	if ev := h.eventsWith("FailedPreStopHook"); len(ev) != 1 {
		t.Errorf("events %q, want one FailedPreStopHook", ev)
	}
}

func TestHungHTTPPreStopIsCutOffAtTheGracePeriod(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := newHookServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](45)
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/hang", Port: intstr.FromInt32(int32(srv.port))}}}
	h.sync(pod)
	id := h.status(pod).FindContainerStatus("app").ID.ID

	done := make(chan error, 1)
	go func() { done <- h.rt.KillPod(h.ctx, pod, nil, nil) }()
	receive(t, arrived, "the hook's request")
	waitForWaiters(t, h.clock, "the preStop hook")
	h.clock.Step(45 * time.Second)
	if err := receive(t, done, "KillPod with a hung HTTP preStop"); err != nil {
		t.Fatal(err)
	}
	h.rec.mu.Lock()
	got := h.rec.stops[id]
	h.rec.mu.Unlock()
	if got != 2 {
		t.Errorf("stopped with %ds after the hook used the whole 45 s, want the minimum 2", got)
	}
	if got := srv.requests(); len(got) != 1 {
		t.Errorf("hook requests %q, want one", got)
	}
}

func TestHungPostStartEndsWithTheSyncsContext(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"setup"}}}}
	withEnv(&pod.Spec.Containers[0], fakecri.EnvExec, `{"setup": {"delay": "1h"}}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *runtime.SyncResult, 1)
	go func() { done <- h.rt.SyncPod(ctx, pod, h.status(pod)) }()
	waitForWaiters(t, h.clock, "the postStart hook")
	cancel() // what a kill of the pod does to its sync
	s := lastStep(receive(t, done, "SyncPod with a hung postStart"), "app")
	if s == nil || s.Reason != cri.ReasonPostStartHookError {
		t.Errorf("step %+v, want PostStartHookError", s)
	}
}

func TestSleepPreStopLongerThanTheGraceIsCutOff(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 100}}}
	h.sync(pod)
	id := h.status(pod).FindContainerStatus("app").ID.ID
	done := make(chan error, 1)
	go func() { done <- h.rt.KillPod(h.ctx, pod, nil, nil) }()
	waitForWaiters(t, h.clock, "the sleep hook")
	h.clock.Step(10 * time.Second)
	if err := receive(t, done, "KillPod with a long sleep preStop"); err != nil {
		t.Fatal(err)
	}
	h.rec.mu.Lock()
	got := h.rec.stops[id]
	h.rec.mu.Unlock()
	if got != 2 {
		t.Errorf("stopped with %ds, want the minimum 2", got)
	}
}
