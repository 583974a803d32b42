package cri_test

import (
	"context"
	"net/http"
	"strings"
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

// slowPulls is a Runtime over a fakecri whose pulls for the pod take an
// hour on the fake's own clock, which the test never steps: only the
// Runtime's clock decides when the pull is given up.
func slowPulls(t *testing.T, timeout time.Duration) (*cri.Runtime, *clocktesting.FakeClock, *v1.Pod) {
	t.Helper()
	fake, err := fakecri.New(fakecri.Config{Clock: clocktesting.NewFakeClock(t0), Images: []string{"busybox:1.36"}})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	rt, err := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: t.TempDir(), PodsDir: t.TempDir(), Clock: clk, ImagePullTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Annotations = map[string]string{fakecri.AnnotationPullDelay: "1h"}
	pod.Spec.Containers[0].Image = "nodekit.test/slow:1"
	return rt, clk, pod
}

func TestHungPullIsCutOffAtTheDeadline(t *testing.T) {
	rt, clk, pod := slowPulls(t, time.Minute)
	done := make(chan *runtime.SyncResult, 1)
	go func() { done <- rt.SyncPod(context.Background(), pod, nil) }()
	waitForWaiters(t, clk, "the pull deadline")
	clk.Step(59 * time.Second)
	select {
	case res := <-done:
		t.Fatalf("the pull ended before its deadline: %v", res.Steps)
	default:
	}
	clk.Step(time.Second)
	res := receive(t, done, "SyncPod with a hung pull")
	s := lastStep(res, "app")
	if s == nil || s.Reason != cri.ReasonErrImagePull || !strings.Contains(s.Message, "did not finish within 1m0s") {
		t.Errorf("step %+v, want ErrImagePull saying the pull was cut off after 1m", s)
	}
}

func TestPullEndsWithTheCallersContext(t *testing.T) {
	rt, _, pod := slowPulls(t, -1) // no deadline: only the context ends it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *runtime.SyncResult, 1)
	go func() { done <- rt.SyncPod(ctx, pod, nil) }()
	cancel()
	res := receive(t, done, "SyncPod with a cancelled context")
	if s := lastStep(res, "app"); s == nil || s.Err == nil {
		t.Errorf("steps %+v, want the pull to fail", res.Steps)
	}
}

func TestImagePullTimeoutDefault(t *testing.T) {
	if cri.DefaultImagePullTimeout != 30*time.Minute {
		t.Errorf("DefaultImagePullTimeout %s, want the documented 30m", cri.DefaultImagePullTimeout)
	}
	rt, clk, pod := slowPulls(t, 0)
	done := make(chan *runtime.SyncResult, 1)
	go func() { done <- rt.SyncPod(context.Background(), pod, nil) }()
	waitForWaiters(t, clk, "the default pull deadline")
	clk.Step(cri.DefaultImagePullTimeout)
	if s := lastStep(receive(t, done, "SyncPod"), "app"); s == nil || !strings.Contains(s.Message, "within 30m0s") {
		t.Errorf("step %+v, want the pull cut off after the default 30m", s)
	}
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
