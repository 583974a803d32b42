package kube_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kube"
)

// eventCalls records the events the fake API server received.
type eventCalls struct{ ch chan *v1.Event }

func recordEvents(client *fake.Clientset) *eventCalls {
	c := &eventCalls{ch: make(chan *v1.Event, 1000)}
	client.PrependReactor("*", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a := a.(type) {
		case k8stesting.CreateAction:
			c.ch <- a.GetObject().(*v1.Event).DeepCopy()
		case k8stesting.PatchAction:
			c.ch <- &v1.Event{Reason: "patch", Message: string(a.GetPatch())}
		}
		return false, nil, nil
	})
	return c
}

func (c *eventCalls) next(t *testing.T) *v1.Event {
	t.Helper()
	select {
	case e := <-c.ch:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event reached the API server within 10s")
		return nil
	}
}

// runRecorder starts an EventRecorder after recording an event about the
// Node, and checks that this event, recorded before Run, is sent first.
func runRecorder(t *testing.T, cfg kube.EventRecorderConfig, calls *eventCalls) *kube.EventRecorder {
	t.Helper()
	r, err := kube.NewEventRecorder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.Event(nil, v1.EventTypeNormal, "Early", "before Run")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	if e := calls.next(t); e.Reason != "Early" {
		t.Fatalf("first event %+v; want the one recorded before Run", e)
	}
	return r
}

// TestEventRecorder checks the involved objects, the source, the
// counting of a repeated event and the per-object rate limit.
func TestEventRecorder(t *testing.T) {
	client := fake.NewClientset()
	calls := recordEvents(client)
	clk := clocktesting.NewFakeClock(t0)
	r := runRecorder(t, kube.EventRecorderConfig{Client: client, NodeName: "n1", Burst: 5, QPS: 0.1, Clock: clk}, calls)

	pod := apiPod("default", "web", "u1", "n1", 0)
	r.Event(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
	e := calls.next(t)
	ref := e.InvolvedObject
	if ref.Kind != "Pod" || ref.Namespace != "default" || ref.Name != "web" || ref.UID != "u1" || e.Namespace != "default" ||
		e.Type != v1.EventTypeWarning || e.Reason != "BackOff" || e.Source.Component != "kubelet" || e.Source.Host != "n1" {
		t.Fatalf("pod event = %+v", e)
	}
	r.Event(nil, v1.EventTypeWarning, "FailedToDecode", "manifest x.yaml: bad")
	e = calls.next(t)
	if ref := e.InvolvedObject; ref.Kind != "Node" || ref.Name != "n1" || ref.UID != "n1" || e.Reason != "FailedToDecode" {
		t.Fatalf("manifest event = %+v; want the Node as involved object", e)
	}
	// The same event again is a patch of the first one's count.
	r.Event(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
	if e = calls.next(t); e.Reason != "patch" {
		t.Fatalf("repeated event: %+v; want a patch", e)
	}

	// The pod has used 2 of its 5 warnings; 3 more pass, then none until the
	// clock lets one more through.
	for i := range 6 {
		r.Event(pod, v1.EventTypeWarning, fmt.Sprintf("R%d", i), "m")
	}
	other := apiPod("default", "other", "u2", "n1", 0)
	r.Event(other, v1.EventTypeNormal, "Sentinel", "m")
	var reasons []string
	for {
		e := calls.next(t)
		if e.Reason == "Sentinel" {
			break
		}
		reasons = append(reasons, e.Reason)
	}
	if fmt.Sprint(reasons) != "[R0 R1 R2]" {
		t.Fatalf("events of the pod sent in a burst of 5: %v; want [R0 R1 R2]", reasons)
	}
	clk.Step(10 * time.Second)
	r.Event(pod, v1.EventTypeWarning, "Later", "m")
	if e = calls.next(t); e.Reason != "Later" {
		t.Fatalf("after 10s at QPS 0.1: %+v; want the event Later", e)
	}
}

// TestEventRecorderAggregates checks that from the tenth event about an
// object that differs only in its message, they become one combined
// event whose count grows, as the kubelet's do.
func TestEventRecorderAggregates(t *testing.T) {
	client := fake.NewClientset()
	calls := recordEvents(client)
	r := runRecorder(t, kube.EventRecorderConfig{Client: client, NodeName: "n1", Burst: 100, Clock: clocktesting.NewFakeClock(t0)}, calls)
	pod := apiPod("default", "web", "u1", "n1", 0)
	for i := range 12 {
		r.Event(pod, v1.EventTypeWarning, "FailedMount", fmt.Sprintf("volume %d", i))
	}
	var msgs []string
	for range 12 {
		msgs = append(msgs, calls.next(t).Message)
	}
	if msgs[8] != "volume 8" || msgs[9] != "(combined from similar events): volume 9" ||
		!strings.Contains(msgs[10], `"count":2`) || !strings.Contains(msgs[11], `"count":3`) {
		t.Fatalf("messages %q; want nine events, then one combined event created and patched", msgs)
	}
}
