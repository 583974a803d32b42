package status_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/status"
)

func TestStartTime(t *testing.T) {
	m := status.New(status.Config{Clock: clocktesting.NewFakeClock(time.Now())})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u", Name: "p", Namespace: "ns"}}
	if got := m.StartTime("u"); got != nil {
		t.Errorf("unknown pod: %v, want nil", got)
	}
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodPending})
	if got := m.StartTime("u"); got != nil {
		t.Errorf("no start time yet: %v, want nil", got)
	}
	start := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning, StartTime: &start})
	got := m.StartTime("u")
	if got == nil || !got.Equal(&start) {
		t.Fatalf("start time %v, want %v", got, start)
	}
	got.Time = got.Add(time.Hour) // the caller's copy
	if again := m.StartTime("u"); !again.Equal(&start) {
		t.Errorf("start time %v after the caller changed its copy, want %v", again, start)
	}
}
