package agent_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// shutdownStops is fakecri recording each StopContainer: the pod of the
// container and the timeout, in order.
type shutdownStops struct {
	*fakecri.Runtime
	mu    sync.Mutex
	stops []string // "pod:timeout"
}

func (s *shutdownStops) StopContainer(ctx context.Context, id string, timeout int64) error {
	if st, err := s.Runtime.ContainerStatus(ctx, id, false); err == nil {
		s.mu.Lock()
		s.stops = append(s.stops, fmt.Sprintf("%s:%d", st.Status.Labels["io.kubernetes.pod.name"], timeout))
		s.mu.Unlock()
	}
	return s.Runtime.StopContainer(ctx, id, timeout)
}

func (s *shutdownStops) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.stops...)
}

// startShutdownAgent runs an agent with the shutdown configuration on
// fakecri, whose StopContainer calls are recorded, with the given pods
// running.
func startShutdownAgent(t *testing.T, sc agent.ShutdownConfig, pods ...*v1.Pod) (*agent.Agent, *fidelity, *shutdownStops) {
	t.Helper()
	fake := newFake(t)
	rec := &shutdownStops{Runtime: fake}
	dir := t.TempDir()
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: rec, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI:      cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Shutdown: sc,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	f.send(podsource.SET)
	f.send(podsource.ADD, pods...)
	for _, p := range pods {
		f.waitFor(p.Name, "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	}
	return a, f, rec
}

func prioritized(name string, priority *int32, grace int64) *v1.Pod {
	p := apiPod(name, v1.RestartPolicyAlways, []string{"main"})
	p.Spec.Priority = priority
	p.Spec.TerminationGracePeriodSeconds = &grace
	return p
}

func ptr[T any](v T) *T { return &v }

func shutdown(t *testing.T, a *agent.Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// checkShutdownStatus checks the pod ended Failed with the kubelet's
// shutdown reason, message and DisruptionTarget condition.
func checkShutdownStatus(t *testing.T, f *fidelity, name string) {
	t.Helper()
	s := f.waitFor(name, "terminated by the shutdown", func(s v1.PodStatus) bool {
		return s.Phase == v1.PodFailed && len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Terminated != nil
	})
	if s.Reason != "Terminated" || s.Message != "Pod was terminated in response to imminent node shutdown." {
		t.Errorf("%s: reason %q message %q", name, s.Reason, s.Message)
	}
	var found bool
	for _, c := range s.Conditions {
		if c.Type == v1.DisruptionTarget {
			found = true
			if c.Status != v1.ConditionTrue || c.Reason != "TerminationByKubelet" || c.Message != "Pod was terminated in response to imminent node shutdown." || c.LastTransitionTime.IsZero() {
				t.Errorf("%s: DisruptionTarget %+v", name, c)
			}
		}
	}
	if !found {
		t.Errorf("%s: no DisruptionTarget condition in %+v", name, s.Conditions)
	}
}

// With shutdownGracePeriod 30s and 10s for critical pods, the regular
// pods are killed first within 20s (or their own shorter period), the
// critical pod last within 10s; each ends Failed with the kubelet's
// reason, message and condition; the node reports it shuts down, and a
// pod added then is refused.
func TestShutdownKillsCriticalPodsLast(t *testing.T) {
	a, f, rec := startShutdownAgent(t, agent.ShutdownConfig{GracePeriod: 30 * time.Second, CriticalPodsGracePeriod: 10 * time.Second},
		prioritized("critical", ptr(int32(2000000000)), 30),
		prioritized("regular", nil, 30),
		prioritized("short", ptr(int32(1000)), 5),
	)
	if err := a.NodeHealth(); err != nil {
		t.Fatalf("NodeHealth before the shutdown: %v", err)
	}
	shutdown(t, a)
	for _, n := range []string{"critical", "regular", "short"} {
		checkShutdownStatus(t, f, n)
	}
	got := rec.list()
	if len(got) != 3 || got[2] != "critical:10" {
		t.Fatalf("StopContainer calls %v, want the critical pod's last with timeout 10", got)
	}
	want := map[string]bool{"regular:20": true, "short:5": true}
	if !want[got[0]] || !want[got[1]] || got[0] == got[1] {
		t.Errorf("StopContainer calls %v, want regular:20 and short:5 first", got)
	}
	if err := a.NodeHealth(); !errors.Is(err, agent.ErrShuttingDown) || err.Error() != "node is shutting down" {
		t.Errorf("NodeHealth during the shutdown: %v", err)
	}
	if !a.ShuttingDown() {
		t.Errorf("ShuttingDown false after Shutdown")
	}
	f.send(podsource.ADD, apiPod("late", v1.RestartPolicyAlways, []string{"main"}))
	late := f.waitFor("late", "refused", func(s v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	if late.Reason != "NodeShutdown" || late.Message != "Pod was rejected: Pod was rejected as the node is shutting down." {
		t.Errorf("late: %q %q", late.Reason, late.Message)
	}
}

// By pod priority, the groups are killed lowest first, each pod within
// its group's period (or its own, if shorter); a pod below every
// threshold joins the lowest group, one above every threshold the
// highest.
func TestShutdownByPodPriorityInOrder(t *testing.T) {
	a, f, rec := startShutdownAgent(t, agent.ShutdownConfig{ByPodPriority: []agent.ShutdownPriority{
		{Priority: 100000, GracePeriodSeconds: 7},
		{Priority: 10, GracePeriodSeconds: 4},
		{Priority: 1000, GracePeriodSeconds: 6},
	}},
		prioritized("top", ptr(int32(200000)), 30),
		prioritized("mid", ptr(int32(1000)), 30),
		prioritized("low", ptr(int32(999)), 2),
		prioritized("none", nil, 30),
	)
	shutdown(t, a)
	for _, n := range []string{"top", "mid", "low", "none"} {
		checkShutdownStatus(t, f, n)
	}
	got := rec.list()
	if len(got) != 4 {
		t.Fatalf("StopContainer calls %v, want 4", got)
	}
	first := map[string]bool{"low:2": true, "none:4": true}
	if !first[got[0]] || !first[got[1]] || got[0] == got[1] || got[2] != "mid:6" || got[3] != "top:7" {
		t.Errorf("StopContainer calls %v, want low:2 and none:4, then mid:6, then top:7", got)
	}
}

// Without a grace period, Shutdown kills nothing and says so.
func TestShutdownWithoutGracePeriod(t *testing.T) {
	a, f, rec := startShutdownAgent(t, agent.ShutdownConfig{}, prioritized("web", nil, 30))
	if err := a.Shutdown(context.Background()); err == nil {
		t.Fatal("Shutdown without a grace period: no error")
	}
	if s, _ := f.history.last("web"); s.Phase != v1.PodRunning || len(rec.list()) != 0 {
		t.Errorf("web: phase %s, stops %v; want it left running", s.Phase, rec.list())
	}
}

// A critical period longer than the whole is refused.
func TestShutdownConfigValidated(t *testing.T) {
	_, err := agent.New(agent.Config{NodeName: "node", RuntimeService: newFake(t), ImageService: newFake(t),
		Shutdown: agent.ShutdownConfig{GracePeriod: time.Second, CriticalPodsGracePeriod: 2 * time.Second}})
	if err == nil {
		t.Fatal("no error")
	}
}

// hangingStops is fakecri whose StopContainer for the pod "stuck" never
// returns until its ctx ends, as a runtime that does not answer.
type hangingStops struct {
	*shutdownStops
}

func (h hangingStops) StopContainer(ctx context.Context, id string, timeout int64) error {
	if st, err := h.Runtime.ContainerStatus(ctx, id, false); err == nil && st.Status.Labels["io.kubernetes.pod.name"] == "stuck" {
		h.mu.Lock()
		h.stops = append(h.stops, fmt.Sprintf("stuck:%d", timeout))
		h.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	return h.shutdownStops.StopContainer(ctx, id, timeout)
}

// A group whose pods do not stop holds the next one back for its grace
// period on the clock only: the critical pod is killed once the clock
// has passed the regular pods' 20s, not before.
func TestShutdownGroupWaitsForItsPeriodOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	fake := newFake(t)
	rec := hangingStops{&shutdownStops{Runtime: fake}}
	dir := t.TempDir()
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: rec, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		CRI:      cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Shutdown: agent.ShutdownConfig{GracePeriod: 30 * time.Second, CriticalPodsGracePeriod: 10 * time.Second},
		Clock:    clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	// The agent's relist and resyncs run on the fake clock: each poll
	// moves it on by a second.
	step := func(what string, cond func() bool) {
		t.Helper()
		eventuallyShowing(t, what, func() bool { clk.Step(time.Second); return cond() }, func() string { return fmt.Sprint(rec.list()) })
	}
	f.send(podsource.SET)
	f.send(podsource.ADD, prioritized("stuck", nil, 30), prioritized("critical", ptr(int32(2000000000)), 30))
	for _, n := range []string{"stuck", "critical"} {
		step(n+" running", func() bool { s, ok := f.history.last(n); return ok && s.Phase == v1.PodRunning })
	}
	done := make(chan error, 1)
	start := clk.Now()
	go func() { done <- a.Shutdown(context.Background()) }()
	// The kill waits for a pod status newer than the worker's last sync,
	// which a relist on the clock brings when a sync has just ended: the
	// clock moves a second at a time while nothing happens, at most 10 s,
	// well before the regular group's 20 s are over.
	nudges := 0
	eventuallyShowing(t, "stuck's stop", func() bool {
		if len(rec.list()) == 1 {
			return true
		}
		if nudges < 10 {
			nudges++
			clk.Step(time.Second)
		}
		return false
	}, func() string { return fmt.Sprint(rec.list()) })
	var at time.Time
	step("critical's stop", func() bool {
		if len(rec.list()) > 1 {
			at = clk.Now()
			return true
		}
		return false
	})
	if got := rec.list(); got[0] != "stuck:20" || got[1] != "critical:10" || at.Sub(start) < 20*time.Second {
		t.Errorf("StopContainer calls %v, critical's %v into the shutdown; want stuck:20, then critical:10 after 20s", got, at.Sub(start))
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("Shutdown did not return")
	}
}
