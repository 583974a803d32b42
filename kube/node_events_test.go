package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestNodeEvents checks the Node's events: Starting, RegisteredNode,
// NodeReady, and NodeNotReady when the health fails.
func TestNodeEvents(t *testing.T) {
	type ev struct{ typ, reason, message string }
	evs := make(chan ev, 100)
	f := newFixture()
	f.cfg.Events = func(pod *v1.Pod, typ, reason, message string) {
		if pod != nil {
			t.Errorf("node event about pod %s", pod.Name)
		}
		evs <- ev{typ, reason, message}
	}
	n, err := NewNode(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	want := []ev{
		{v1.EventTypeNormal, "Starting", "Starting node agent."},
		{v1.EventTypeNormal, "RegisteredNode", "Registered node n1"},
		{v1.EventTypeNormal, "NodeReady", "Node n1 status is now: NodeReady"},
	}
	for _, w := range want {
		select {
		case got := <-evs:
			if got != w {
				t.Fatalf("event %+v; want %+v", got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event %+v", w)
		}
	}
	f.health.set(fmt.Errorf("runtime down"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.clock.Step(10 * time.Second)
		select {
		case got := <-evs:
			if got.reason != "NodeNotReady" {
				t.Fatalf("event %+v; want NodeNotReady", got)
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no NodeNotReady event")
		}
	}
}
