package images_test

import (
	"context"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime/cri/images"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func waitABit() { goruntime.Gosched() }

// waitForWaiters waits until something waits on clk, failing with what
// after realWait.
func waitForWaiters(t *testing.T, clk *clocktesting.FakeClock, what string) {
	t.Helper()
	deadline := time.Now().Add(realWait)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatalf("nothing waits on the clock: %s", what)
		}
		waitABit()
	}
}

type result struct {
	reason string
	err    error
}

func receive(t *testing.T, ch <-chan result, what string) result {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(realWait):
		t.Fatalf("%s did not return within %s of real time", what, realWait)
	}
	return result{}
}

// slowPulls is a Manager over a fakecri whose pulls for the pod take an
// hour on the fake's own clock, which the test never steps: only the
// Manager's clock decides when the pull is given up.
func slowPulls(t *testing.T, timeout time.Duration) (*images.Manager, *clocktesting.FakeClock, *v1.Pod) {
	t.Helper()
	fake, err := fakecri.New(fakecri.Config{Clock: clocktesting.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	m, err := images.New(images.Config{Service: fake, Clock: clk, PullTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod("nodekit.test/slow:1", "")
	pod.Annotations = map[string]string{fakecri.AnnotationPullDelay: "1h"}
	return m, clk, pod
}

func ensureAsync(ctx context.Context, m *images.Manager, pod *v1.Pod) <-chan result {
	done := make(chan result, 1)
	go func() {
		_, reason, err := m.EnsureImage(ctx, pod, &pod.Spec.Containers[0], "spec.containers[0]", sandboxConfig(pod))
		done <- result{reason, err}
	}()
	return done
}

func TestHungPullIsCutOffAtTheDeadline(t *testing.T) {
	m, clk, pod := slowPulls(t, time.Minute)
	done := ensureAsync(context.Background(), m, pod)
	waitForWaiters(t, clk, "the pull deadline")
	clk.Step(59 * time.Second)
	select {
	case res := <-done:
		t.Fatalf("the pull ended before its deadline: %+v", res)
	default:
	}
	clk.Step(time.Second)
	res := receive(t, done, "EnsureImage with a hung pull")
	if res.reason != images.ReasonErrImagePull || !strings.Contains(res.err.Error(), "did not finish within 1m0s") {
		t.Errorf("%+v, want ErrImagePull saying the pull was cut off after 1m", res)
	}
}

func TestPullEndsWithTheCallersContext(t *testing.T) {
	m, _, pod := slowPulls(t, -1) // no deadline: only the context ends it
	ctx, cancel := context.WithCancel(context.Background())
	done := ensureAsync(ctx, m, pod)
	cancel()
	if res := receive(t, done, "EnsureImage with a cancelled context"); res.err == nil || res.reason != images.ReasonErrImagePull {
		t.Errorf("%+v, want the pull to fail with ErrImagePull", res)
	}
}

func TestPullTimeoutDefault(t *testing.T) {
	if images.DefaultPullTimeout != 30*time.Minute {
		t.Errorf("DefaultPullTimeout %s, want the documented 30m", images.DefaultPullTimeout)
	}
	m, clk, pod := slowPulls(t, 0)
	done := ensureAsync(context.Background(), m, pod)
	waitForWaiters(t, clk, "the default pull deadline")
	clk.Step(images.DefaultPullTimeout)
	if res := receive(t, done, "EnsureImage"); res.err == nil || !strings.Contains(res.err.Error(), "within 30m0s") {
		t.Errorf("%+v, want the pull cut off after the default 30m", res)
	}
}

// A pull waiting for its slot is not yet on the clock, and ends with its
// context.
func TestPullWaitingForASlot(t *testing.T) {
	m, clk, pod := slowPulls(t, time.Minute)
	first := ensureAsync(context.Background(), m, pod)
	waitForWaiters(t, clk, "the first pull")
	second := testPod("nodekit.test/other:1", "")
	second.UID = "uid-second"
	ctx, cancel := context.WithCancel(context.Background())
	waiting := ensureAsync(ctx, m, second)
	cancel()
	if res := receive(t, waiting, "a pull waiting for the slot"); res.reason != images.ReasonErrImagePull || res.err == nil {
		t.Errorf("%+v, want ErrImagePull for a pull cancelled while waiting", res)
	}
	clk.Step(time.Minute)
	if res := receive(t, first, "the first pull"); res.err == nil {
		t.Errorf("%+v, want the first pull cut off", res)
	}
}
