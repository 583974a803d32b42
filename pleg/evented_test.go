package pleg_test

import (
	"context"
	goruntime "runtime"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// refusing is a runtime without the event stream, like containerd 1.6.
type refusing struct{}

func (refusing) GetContainerEvents(context.Context, chan *runtimeapi.ContainerEventResponse, func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	return status.Error(codes.Unimplemented, "unknown method GetContainerEvents")
}

func startEvented(t *testing.T, e *env, streamer pleg.EventStreamer) *pleg.Evented {
	t.Helper()
	ev, err := pleg.NewEvented(pleg.EventedConfig{
		Config:   pleg.Config{Runtime: e.rt, Cache: e.cache, Clock: e.clock, EventBuffer: 100},
		Streamer: streamer,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- ev.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ev
}

func TestEventedSeesChangesWithoutRelisting(t *testing.T) {
	e := newEnv(t, 100)
	ev := startEvented(t, e, e.fake)
	// The stream counts as up once it stood for 100ms.
	for i := 0; !ev.Streaming(); i++ {
		if i == 100000 {
			t.Fatal("the stream never counted as up")
		}
		e.clock.Step(100 * time.Millisecond)
		yield()
	}
	relists := e.rt.inspections.Load()
	a := testPod("a", "FAKECRI_EXIT_AFTER", "30s", "FAKECRI_EXIT_CODE", "2")
	if err := e.rt.SyncPod(e.ctx, a, nil).Error(); err != nil {
		t.Fatal(err)
	}
	seen := map[pleg.EventType]int{}
	for seen[pleg.ContainerStarted] < 2 {
		seen[nextEvent(t, e, ev).Type]++
	}
	st, err := e.cache.Get(a.UID)
	if err != nil || st.FindContainerStatus("c") == nil || st.FindContainerStatus("c").State != runtime.ContainerStateRunning {
		t.Fatalf("cache after the events: %+v %v", st, err)
	}
	if e.rt.inspections.Load() == relists {
		t.Error("no pod was inspected for the events")
	}

	e.clock.Step(30 * time.Second) // the container exits
	for nextEvent(t, e, ev).Type != pleg.ContainerDied {
	}
	if st, _ := e.cache.Get(a.UID); st.FindContainerStatus("c").State != runtime.ContainerStateExited {
		t.Error("the cache missed the exit")
	}
	if err := ev.Healthy(); err != nil {
		t.Errorf("healthy while streaming: %v", err)
	}
}

func TestEventedFallsBackToRelisting(t *testing.T) {
	e := newEnv(t, 100)
	ev := startEvented(t, e, refusing{})
	a := testPod("a")
	if err := e.rt.SyncPod(e.ctx, a, nil).Error(); err != nil {
		t.Fatal(err)
	}
	// Relists come every second of the clock while the stream is refused.
	var got *pleg.Event
	for got == nil {
		e.clock.Step(time.Second)
		select {
		case got = <-ev.Watch():
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got.Type != pleg.ContainerStarted || got.ID != a.UID {
		t.Errorf("event %+v, want ContainerStarted of a", got)
	}
	if ev.Streaming() {
		t.Error("streaming with a runtime that refuses the stream")
	}
}

func yield() { goruntime.Gosched() }

// nextEvent returns the generator's next event. While none comes it
// steps the clock a second every 200ms of wall time, so that a pod held
// back (a slow inspection, as measured on the fake clock) is let go; it
// fails after 20s of wall time.
func nextEvent(t *testing.T, e *env, g pleg.Generator) *pleg.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case ev := <-g.Watch():
			return ev
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no event within 20s")
			}
			e.clock.Step(time.Second)
		}
	}
}
