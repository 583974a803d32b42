package runtime_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodekit/nodekit/runtime"
)

func TestRunningPod(t *testing.T) {
	st := &runtime.PodStatus{ID: "uid", Name: "p", Namespace: "ns",
		SandboxStatuses: []*runtime.SandboxStatus{{ID: "new", State: runtime.SandboxStateReady}, {ID: "old", State: runtime.SandboxStateNotReady}},
		ContainerStatuses: []*runtime.ContainerStatus{
			{Name: "a", State: runtime.ContainerStateRunning}, {Name: "b", State: runtime.ContainerStateExited}, {Name: "c", State: runtime.ContainerStateUnknown},
		}}
	p, empty := st.RunningPod(false)
	if empty || len(p.Containers) != 2 || len(p.Sandboxes) != 1 || p.FullName() != "ns/p" {
		t.Errorf("RunningPod(false) = %d containers, %d sandboxes, empty %v", len(p.Containers), len(p.Sandboxes), empty)
	}
	if p, _ := st.RunningPod(true); len(p.Sandboxes) != 2 || p.Sandboxes[1].State != runtime.ContainerStateExited {
		t.Errorf("RunningPod(true) sandboxes %v", p.Sandboxes)
	}
	done := &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{{Name: "a", State: runtime.ContainerStateExited}}}
	if _, empty := done.RunningPod(false); !empty {
		t.Error("a pod with nothing running is not empty")
	}
}

// MayRun answers what RunningPod(false) would, for every combination of
// a container's and a sandbox's state.
func TestMayRunIsRunningPodNotEmpty(t *testing.T) {
	containers := []runtime.ContainerState{runtime.ContainerStateCreated, runtime.ContainerStateRunning, runtime.ContainerStateExited, runtime.ContainerStateUnknown}
	sandboxes := []runtime.SandboxState{runtime.SandboxStateReady, runtime.SandboxStateNotReady}
	var cases []*runtime.PodStatus
	cases = append(cases, &runtime.PodStatus{})
	for _, c := range containers {
		cases = append(cases, &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{{Name: "a", State: runtime.ContainerStateExited}, {Name: "b", State: c}}})
		for _, sb := range sandboxes {
			cases = append(cases, &runtime.PodStatus{
				SandboxStatuses:   []*runtime.SandboxStatus{{ID: "old", State: runtime.SandboxStateNotReady}, {ID: "new", State: sb}},
				ContainerStatuses: []*runtime.ContainerStatus{{Name: "b", State: c}},
			})
		}
	}
	for i, st := range cases {
		_, empty := st.RunningPod(false)
		if st.MayRun() == empty {
			t.Errorf("case %d: MayRun %v, RunningPod(false) empty %v", i, st.MayRun(), empty)
		}
	}
}

func TestBackOffUntil(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &runtime.BackOffError{Err: errors.New("a"), Until: t0.Add(20 * time.Second)}
	b := &runtime.BackOffError{Err: errors.New("b"), Until: t0.Add(10 * time.Second)}
	for _, tc := range []struct {
		name string
		err  error
		want time.Time
		ok   bool
	}{
		{"nil", nil, time.Time{}, false},
		{"a plain error", errors.New("x"), time.Time{}, false},
		{"one", a, a.Until, true},
		{"wrapped", fmt.Errorf("pod x: %w", a), a.Until, true},
		{"joined with others: the earliest", errors.Join(errors.New("x"), a, fmt.Errorf("y: %w", b)), b.Until, true},
	} {
		got, ok := runtime.BackOffUntil(tc.err)
		if !got.Equal(tc.want) || ok != tc.ok {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if !errors.Is(fmt.Errorf("w: %w", a), a.Err) {
		t.Error("a BackOffError does not unwrap to its error")
	}
}

func TestProbeResultString(t *testing.T) {
	for r, want := range map[runtime.ProbeResult]string{runtime.ProbeUnknown: "unknown", runtime.ProbeSuccess: "success", runtime.ProbeFailure: "failure", runtime.ProbeWarning: "warning", 7: "ProbeResult(7)"} {
		if got := r.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int8(r), got, want)
		}
	}
}

// A clone is equal to its pod and shares no container with it: changing
// the pod afterwards leaves the clone as it was.
func TestPodClone(t *testing.T) {
	p := &runtime.Pod{ID: "uid", Name: "p", Namespace: "ns", CreatedAt: time.Unix(5, 0),
		Sandboxes:  []*runtime.Container{{ID: runtime.ContainerID{Type: "fake", ID: "s"}, State: runtime.ContainerStateRunning}},
		Containers: []*runtime.Container{{ID: runtime.ContainerID{Type: "fake", ID: "a"}, Name: "a", Hash: 7}, {ID: runtime.ContainerID{Type: "fake", ID: "b"}, Name: "b"}}}
	c := p.Clone()
	if diff := cmp.Diff(p, c); diff != "" {
		t.Fatalf("clone (-pod +clone):\n%s", diff)
	}
	if c.Sandboxes[0] == p.Sandboxes[0] || c.Containers[0] == p.Containers[0] || c.Containers[1] == p.Containers[1] {
		t.Fatal("the clone shares containers with its pod")
	}
	p.Name, p.Sandboxes[0].State, p.Containers[1].ID.ID, p.Containers[0] = "q", runtime.ContainerStateExited, "z", &runtime.Container{Name: "x"}
	if c.Name != "p" || c.Sandboxes[0].State != runtime.ContainerStateRunning || c.Containers[1].ID.ID != "b" || c.Containers[0].Name != "a" || c.Containers[0].Hash != 7 {
		t.Errorf("the clone changed with its pod: %+v, %+v %+v %+v", c, *c.Sandboxes[0], *c.Containers[0], *c.Containers[1])
	}
	if empty := (&runtime.Pod{ID: "e"}).Clone(); empty.Sandboxes != nil || empty.Containers != nil {
		t.Errorf("a pod without containers cloned into %+v", empty)
	}
}
