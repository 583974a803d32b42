package probes

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/podutil"
)

// worker probes one container with one probe, the kubelet's
// pkg/kubelet/prober/worker.go rules.
type worker struct {
	m         *Manager
	podUID    types.UID
	container *v1.Container
	typ       Type
	probe     *v1.Probe
	stop      context.CancelFunc // set by startLocked under m.mu
	retired   bool               // stopped by its own rules; set under m.mu
	// trigger asks for a probe now (Manager.Trigger); capacity 1, sent to
	// without blocking, so triggers that come while one is pending merge.
	trigger chan struct{}

	// mu guards pod and containerID; the rest belong to run's goroutine.
	mu          sync.Mutex
	pod         *v1.Pod
	containerID string
	lastResult  Result
	resultRun   int
	onHold      bool
}

func newWorker(m *Manager, pod *v1.Pod, c *v1.Container, typ Type, p *v1.Probe) *worker {
	return &worker{m: m, podUID: pod.UID, pod: pod, container: c, typ: typ, probe: p, trigger: make(chan struct{}, 1)}
}

func (w *worker) setPod(p *v1.Pod) {
	w.mu.Lock()
	w.pod = p
	w.mu.Unlock()
}

func (w *worker) currentID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.containerID
}

// initial is what a probe reports before it has run: readiness is
// failing, liveness is passing, startup is unknown.
func (w *worker) initial() Result {
	switch w.typ {
	case Readiness:
		return Failure
	case Liveness:
		return Success
	}
	return Unknown
}

func seconds(n int32, def int32) time.Duration {
	if n <= 0 {
		n = def
	}
	return time.Duration(n) * time.Second
}

// run probes every period, the first time after the jitter, and at once
// when triggered (the kubelet's manual trigger). The timer is armed only
// while the worker waits, so a worker holds a clock waiter exactly while
// it is idle. Probes stay on the period's grid, which a triggered probe
// does not move; one that overruns its period is followed at once by the
// next, and the grid restarts from there, as a ticker's single buffered
// tick would. It returns true when the worker stopped by its own rules
// (doProbe said so), false when ctx ended.
func (w *worker) run(ctx context.Context) (stoppedItself bool) {
	period := seconds(w.probe.PeriodSeconds, 10)
	clk := w.m.cfg.Clock
	next := clk.Now().Add(w.m.cfg.Jitter(period))
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		triggered := false
		if wait := next.Sub(clk.Now()); wait > 0 {
			if timer == nil {
				timer = clk.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-ctx.Done():
				return false
			case <-timer.C():
			case <-w.trigger:
				timer.Stop()
				triggered = true
			}
		} else if ctx.Err() != nil {
			return false
		}
		if !w.doProbe(ctx) {
			return ctx.Err() == nil
		}
		if triggered {
			continue // the grid stays
		}
		next = next.Add(period)
		if now := clk.Now(); next.Before(now) {
			next = now
		}
	}
}

// doProbe runs the probe once if it should, and applies the thresholds.
// It returns false when the worker is to stop for good, by the rules of
// the kubelet's worker: the pod reached a terminal phase (checked before
// anything else, so such a pod is never probed); its container terminated
// and will not be started again (by its restart settings, or by a restart
// of all the pod's containers that the pod's status shows under way or
// about to start: podutil.RestartingAllContainers); or, for liveness and
// startup, the pod is being deleted (after a last Success, so the
// shutdown stays quiet).
func (w *worker) doProbe(ctx context.Context) (keepGoing bool) {
	m := w.m
	st, ok := m.cfg.Status(w.podUID)
	if !ok {
		return true // no status yet, or no more
	}
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		return false
	}
	var cs *v1.ContainerStatus
	for _, list := range [][]v1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == w.container.Name && list[i].ContainerID != "" {
				cs = &list[i]
			}
		}
		if cs != nil {
			break
		}
	}
	if cs == nil {
		return true // not created yet, or removed
	}
	w.mu.Lock()
	pod := w.pod
	if cs.ContainerID != w.containerID {
		old := w.containerID
		w.containerID = cs.ContainerID
		w.mu.Unlock()
		if old != "" {
			m.forget(old)
		}
		w.onHold, w.resultRun, w.lastResult = false, 0, Unknown
		m.set(ctx, w, cs.ContainerID, w.initial())
	} else {
		w.mu.Unlock()
	}
	if w.onHold {
		return true // held until the container restarts (a new container ID)
	}
	if cs.State.Running == nil {
		m.set(ctx, w, cs.ContainerID, Failure)
		// Waiting containers start (again); a terminated one may not,
		// unless all the pod's containers are being restarted.
		return cs.State.Terminated == nil || restarts(pod, w.container, cs.State.Terminated.ExitCode) ||
			podutil.RestartingAllContainers(pod, &st)
	}
	if pod.DeletionTimestamp != nil && (w.typ == Liveness || w.typ == Startup) {
		m.set(ctx, w, cs.ContainerID, Success)
		return false
	}
	if w.typ != Startup && !m.started(w, cs.ContainerID) {
		return true // liveness and readiness wait for the startup probe
	}
	if m.cfg.Clock.Since(cs.State.Running.StartedAt.Time) < time.Duration(w.probe.InitialDelaySeconds)*time.Second {
		return true
	}

	target := Target{Pod: pod, Container: w.container, ContainerID: rawID(cs.ContainerID), PodIP: st.PodIP}
	start := m.cfg.Clock.Now()
	result, output, err, ok := w.callProber(ctx, target)
	if !ok || ctx.Err() != nil {
		return true
	}
	if err != nil {
		// The probe could not be run (no runtime to exec in, a request
		// that cannot be built, ...): as in the kubelet, an event says so
		// and the round is thrown away, counting towards no threshold.
		m.cfg.Events(pod, v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("container %s: %s probe errored and resulted in unknown state: %v", w.container.Name, w.typ, err))
		return true
	}
	switch result {
	case Warning:
		// A pass worth a warning (an HTTP redirect to another host): as
		// in the kubelet, an event says so and the run counts as a Success.
		m.cfg.Events(pod, v1.EventTypeWarning, "ProbeWarning", fmt.Sprintf("container %s: %s probe warning: %s", w.container.Name, w.typ, strings.TrimSpace(output)))
		result = Success
	case Success:
	default:
		result = Failure // a Prober without a verdict fails, as in the kubelet
	}
	m.metrics.observe(pod, w.container.Name, w.typ, result, m.cfg.Clock.Since(start))
	if result == Failure {
		m.cfg.Events(pod, v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("container %s: %s probe failed: %s", w.container.Name, w.typ, strings.TrimSpace(output)))
	}

	if w.lastResult == result {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = result, 1
	}
	failures, successes := int(w.probe.FailureThreshold), int(w.probe.SuccessThreshold)
	if failures <= 0 {
		failures = 3
	}
	if successes <= 0 {
		successes = 1
	}
	if (result == Failure && w.resultRun < failures) || (result == Success && w.resultRun < successes) {
		return true // not enough in a row yet: the previous result stands
	}
	m.set(ctx, w, cs.ContainerID, result)
	if (w.typ == Liveness && result == Failure) || w.typ == Startup {
		// A liveness failure means a restart, and a startup probe has
		// decided: hold until the next container.
		w.onHold, w.resultRun = true, 0
	}
	return true
}

// restarts reports whether the container is started again after it
// exited with code, the kubelet's rule with its ContainerRestartRules
// feature: the container's restartPolicyRules, then its own restart
// policy (Always for sidecars), then the pod's (Never: no; OnFailure:
// only after a non-zero code; Always or unset: yes).
func restarts(pod *v1.Pod, c *v1.Container, code int32) bool {
	return podutil.ContainerShouldRestart(c, &pod.Spec, code)
}

// callProber runs the Prober once. A panic in it is logged, counted in
// nodekit_prober_panics_total, and leaves
// this round without a result (ok false); the worker goes on probing, as
// the kubelet's workers survive a crashing prober.
func (w *worker) callProber(ctx context.Context, target Target) (result Result, output string, err error, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			w.m.cfg.Logger.Error(fmt.Errorf("%v\n%s", r, debug.Stack()), "prober panicked",
				"pod", target.Pod.Namespace+"/"+target.Pod.Name, "container", w.container.Name, "probe", string(w.typ))
			w.m.metrics.panics.Inc()
			ok = false
		}
	}()
	result, output, err = w.m.cfg.Prober.Probe(ctx, target, w.probe, seconds(w.probe.TimeoutSeconds, 1))
	return result, output, err, true
}

// rawID strips the "type://" prefix of a container ID.
func rawID(id string) string {
	if _, after, ok := strings.Cut(id, "://"); ok {
		return after
	}
	return id
}
