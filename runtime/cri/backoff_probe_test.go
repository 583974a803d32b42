package cri_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// failingProbes fails the liveness or the startup probe of the container
// IDs it is told about, and passes every other probe.
type failingProbes struct {
	startup bool // fail the startup probe rather than liveness
	mu      sync.Mutex
	ids     map[string]bool
}

func (f *failingProbes) fail(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids[id] = true
}

func (f *failingProbes) result(id runtime.ContainerID, startup bool) cri.ProbeResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ids[id.ID] && f.startup == startup {
		return cri.ProbeFailure
	}
	return cri.ProbeSuccess
}

func (f *failingProbes) Liveness(id runtime.ContainerID) cri.ProbeResult { return f.result(id, false) }
func (f *failingProbes) Startup(id runtime.ContainerID) cri.ProbeResult  { return f.result(id, true) }

// TestProbeRestartsBackOff checks that a container restarted because a
// probe failed goes through the crash-loop back-off as the kubelet's
// does: the back-off is judged from the newest exited instance of the
// container in the observation the sync started from, so the instance
// being killed does not count yet, and the default delays (10 s doubling
// to 300 s) hold a restart back whenever the instance before the killed
// one exited more recently than the current delay.
func TestProbeRestartsBackOff(t *testing.T) {
	for _, kind := range []string{"liveness", "startup"} {
		t.Run(kind, func(t *testing.T) {
			probes := &failingProbes{startup: kind == "startup", ids: map[string]bool{}}
			h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.Probes = probes })
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}}
			if probes.startup {
				pod.Spec.Containers[0].StartupProbe = probe
			} else {
				pod.Spec.Containers[0].LivenessProbe = probe
			}
			h.sync(pod)

			// fail makes the running instance fail its probe after it ran
			// for run, and syncs: the instance is killed, and restarted
			// unless the back-off holds it.
			const run = 5 * time.Second
			fail := func() *runtime.SyncStep {
				t.Helper()
				h.clock.Step(run)
				st := h.status(pod)
				app := st.FindContainerStatus("app")
				if app == nil || app.State != runtime.ContainerStateRunning {
					t.Fatalf("app is %+v, want a running instance", app)
				}
				probes.fail(app.ID.ID)
				s := lastStep(h.rt.SyncPod(h.ctx, pod, st), "app")
				if s == nil || s.Action != runtime.ActionStartContainer {
					t.Fatalf("after the %s failure: step %+v, want a start attempt", kind, s)
				}
				return s
			}
			// The first two restarts are immediate: there is no earlier
			// exited instance for the first, and the second records the
			// first delay.
			for i := 0; i < 2; i++ {
				if s := fail(); s.Err != nil {
					t.Fatalf("restart %d: %+v, want immediate", i+1, s)
				}
			}
			for _, delay := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second} {
				s := fail()
				if s.Reason != cri.ReasonCrashLoopBackOff || !strings.Contains(s.Message, "back-off "+delay.String()) {
					t.Fatalf("a %s restart while backing off: %+v, want CrashLoopBackOff with back-off %v", kind, s, delay)
				}
				h.clock.Step(delay - time.Second)
				if s := lastStep(h.rt.SyncPod(h.ctx, pod, h.status(pod)), "app"); s == nil || s.Reason != cri.ReasonCrashLoopBackOff {
					t.Fatalf("%v after the kill, within a %v back-off: %+v, want still backing off", delay-time.Second, delay, s)
				}
				h.clock.Step(time.Second)
				if s := lastStep(h.rt.SyncPod(h.ctx, pod, h.status(pod)), "app"); s == nil || s.Err != nil {
					t.Fatalf("%v after the kill: %+v, want a restart", delay, s)
				}
			}
			// At the 300 s cap the instance before the one killed exited
			// more than 300 s ago, so this restart goes ahead, and the one
			// after it waits the whole 300 s again.
			if s := fail(); s.Err != nil {
				t.Fatalf("a restart more than the capped delay after the previous exit: %+v, want immediate", s)
			}
			if s := fail(); s.Reason != cri.ReasonCrashLoopBackOff || !strings.Contains(s.Message, "back-off 5m0s") {
				t.Fatalf("the next restart: %+v, want CrashLoopBackOff with back-off 5m0s", s)
			}
			if n := len(h.eventsWith("BackOff")); n == 0 {
				t.Error("no BackOff event")
			}
		})
	}
}
