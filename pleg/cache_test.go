package pleg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// Delete wakes the pod's readers waiting for an observation older than
// the one that found the pod gone, and only those; they get an empty
// status.
func TestCacheDeleteWakesReadersOfThePod(t *testing.T) {
	c := pleg.NewCache()
	c.Set("a", ready("a", "c"), nil, t0)
	got := make(chan *runtime.PodStatus, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		st, _ := c.GetNewerThan(ctx, "a", t0.Add(time.Second))
		got <- st
	}()
	waitFor(t, "the reader waits", func() bool {
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.GetNewerThan(done, "a", t0.Add(time.Second))
		return err != nil
	})
	c.Delete("a", t0.Add(-time.Second)) // older than the entry: ignored
	if st, _ := c.Get("a"); st.FindContainerStatus("c") == nil {
		t.Fatalf("an older removal replaced the status: %+v", st)
	}
	c.Delete("a", t0.Add(2*time.Second))
	select {
	case st := <-got:
		if st.ID != "a" || len(st.ContainerStatuses)+len(st.SandboxStatuses) != 0 {
			t.Errorf("the reader got %+v, want an empty status", st)
		}
	case <-time.After(wallLimit):
		t.Fatal("Delete did not wake the reader")
	}
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.GetNewerThan(done, "a", t0.Add(2*time.Second)); err == nil {
		t.Error("a reader waiting for an observation after the removal was served")
	}
	if _, ok := c.Statuses()["a"]; ok {
		t.Error("Statuses lists the removed pod")
	}
	c.UpdateTime(t0.Add(3 * time.Second))
	if st, err := c.GetNewerThan(done, "a", t0.Add(2*time.Second)); err != nil || len(st.ContainerStatuses) != 0 {
		t.Errorf("after the global timestamp passed the removal: %+v, %v", st, err)
	}
}

// A failed observation keeps the last status beside its error.
func TestCacheKeepsTheLastStatusBesideAnError(t *testing.T) {
	c := pleg.NewCache()
	good := ready("a", "c")
	c.Set("a", good, nil, t0)
	failure := errors.New("inspecting a: unavailable")
	c.Set("a", nil, failure, t0.Add(time.Second))
	st, err := c.Get("a")
	if st != good || !errors.Is(err, failure) {
		t.Errorf("after a failure: %+v, %v; want the last status and the error", st, err)
	}
	if c.Statuses()["a"] != good {
		t.Error("Statuses lost the last status")
	}
	c.Set("a", ready("a"), nil, t0.Add(2*time.Second))
	if st, err := c.Get("a"); err != nil || st.FindContainerStatus("c") != nil {
		t.Errorf("after a success: %+v, %v", st, err)
	}
}
