package agent

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// A sync ends only the resize whose allocation it ran with: one that
// started before a newer resize was accepted leaves it in progress; a
// failed resize step records reason Error; the next good sync ends it.
func TestResizeSyncedOnlyEndsItsOwnResize(t *testing.T) {
	var events []string
	a := &Agent{resizes: map[types.UID]*resizeState{}}
	a.cfg.Events = func(_ *v1.Pod, _, reason, _ string) { events = append(events, reason) }
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u", Generation: 3}}
	a.resizes["u"] = &resizeState{alloc: allocationOf(pod), inProgress: &status.Reason{}, seq: 2, generation: 3}

	if a.resizeSynced(pod, 1, &runtime.SyncResult{}, nil) || a.resizes["u"].inProgress == nil {
		t.Fatal("a sync with the allocation before the last accepted resize ended it")
	}
	failed := &runtime.SyncResult{Steps: []runtime.SyncStep{{Action: runtime.ActionResize, Err: errors.New("x"), Message: "cannot decrease memory limits: x"}}}
	if !a.resizeSynced(pod, 2, failed, nil) {
		t.Fatal("a failed resize changed nothing")
	}
	if r := a.resizes["u"].inProgress; r == nil || r.Reason != v1.PodReasonError || r.Message != "cannot decrease memory limits: x" {
		t.Fatalf("after a failed resize: %+v, want reason Error with its message", r)
	}
	if a.resizeSynced(pod, 2, failed, nil) {
		t.Error("the same failure again reported a change")
	}
	if !a.resizeSynced(pod, 2, &runtime.SyncResult{}, nil) || a.resizes["u"].inProgress != nil {
		t.Fatal("a good sync did not end the resize")
	}
	if want := []string{ReasonResizeError, ReasonResizeCompleted}; len(events) != 2 || events[0] != want[0] || events[1] != want[1] {
		t.Errorf("events %v, want %v", events, want)
	}
}
