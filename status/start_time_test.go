package status_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/status"
)

// TestStartTime checks the kubelet's status manager's rules for the
// start time: a status without one gets the time it is first recorded,
// and a later status never changes it.
func TestStartTime(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC))
	m := status.New(status.Config{Clock: clk})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u", Name: "p", Namespace: "ns"}}
	if got := m.StartTime("u"); got != nil {
		t.Errorf("unknown pod: %v, want nil", got)
	}
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu"})
	first := metav1.NewTime(clk.Now().Truncate(time.Second))
	got := m.StartTime("u")
	if got == nil || !got.Equal(&first) {
		t.Fatalf("a status without a start time: %v, want the time it was recorded, %v", got, first)
	}
	clk.Step(time.Minute)
	later := metav1.NewTime(clk.Now())
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu", StartTime: &later})
	if got := m.StartTime("u"); got == nil || !got.Equal(&first) {
		t.Errorf("start time %v after a status with another, want it kept, %v", got, first)
	}
	got.Time = got.Add(time.Hour) // the caller's copy
	if again := m.StartTime("u"); !again.Equal(&first) {
		t.Errorf("start time %v after the caller changed its copy, want %v", again, first)
	}

	// A pod whose own status (the API server's) has one keeps it.
	start := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	api := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "v", Name: "q", Namespace: "ns"}, Status: v1.PodStatus{StartTime: &start}}
	m.SetPodStatus(api, v1.PodStatus{Phase: v1.PodRunning, StartTime: &later})
	if got := m.StartTime("v"); got == nil || !got.Equal(&start) {
		t.Errorf("start time %v of a pod whose own status has %v", got, start)
	}
}
