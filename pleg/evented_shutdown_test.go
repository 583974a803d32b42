package pleg_test

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/pleg"
)

// TestEventedHealthyFailsWhileAnInspectionHangs: a generator whose loop is
// stuck in the runtime is not healthy, streaming or not.
func TestEventedHealthyFailsWhileAnInspectionHangs(t *testing.T) {
	rt := newScripted("a")
	ev, stream, clk, _ := startScripted(t, rt)
	gate := make(chan struct{}) // closed by startScripted's cleanup
	rt.set(func() { rt.gates["a"] = gate })
	stream.send(t, "a")
	rt.nextCall(t, "a")
	clk.Step(10 * time.Minute)
	waitFor(t, "unhealthy", func() bool { return ev.Healthy() != nil })
}

// sendingBlindly streams events for three pods as fast as it can and,
// like k8s.io/cri-client's stream, sends on the channel without watching
// the context; it checks the context only between events.
type sendingBlindly struct{}

func (sendingBlindly) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, _ func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		uid := string(rune('a' + i%3))
		ch <- &runtimeapi.ContainerEventResponse{PodSandboxStatus: &runtimeapi.PodSandboxStatus{Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid, Name: uid, Namespace: "ns"}}}
	}
}

// TestEventedStopsWithAStreamerThatSendsBlindly: Run returns once its
// context ends even when the streamer is blocked sending an event.
func TestEventedStopsWithAStreamerThatSendsBlindly(t *testing.T) {
	for round := 0; round < 20; round++ {
		rt := newScripted("a", "b", "c")
		clk := clocktesting.NewFakeClock(t0)
		rt.clock = clk
		drained := make(chan struct{})
		go func() {
			for {
				select {
				case <-rt.called:
				case <-drained:
					return
				}
			}
		}()
		ev, err := pleg.NewEvented(pleg.EventedConfig{Config: pleg.Config{Runtime: rt, Cache: pleg.NewCache(), Clock: clk, EventBuffer: 1 << 20}, Streamer: sendingBlindly{}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ev.Run(ctx) }()
		waitFor(t, "the stream up", func() bool {
			clk.Step(100 * time.Millisecond)
			return ev.Streaming()
		})
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Run did not return within 10s of its context's end", round)
		}
		close(drained)
	}
}
