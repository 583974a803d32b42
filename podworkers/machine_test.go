package podworkers_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
)

// The machine's tests drive it directly: no goroutine, no clock, no wait.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var errStep = errors.New("injected")

type machineEnv struct {
	t   *testing.T
	m   *podworkers.Machine
	now time.Time
}

func newMachine(t *testing.T) *machineEnv {
	return &machineEnv{t: t, m: podworkers.NewMachine(podworkers.MachineConfig{}), now: t0}
}

func (e *machineEnv) update(typ podworkers.UpdateType, p *v1.Pod) podworkers.UpdateEffect {
	return e.m.Update(podworkers.UpdatePodOptions{UpdateType: typ, Pod: p}, e.now)
}

func (e *machineEnv) kill(p *v1.Pod, grace int64) podworkers.UpdateEffect {
	return e.m.Update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p, Kill: &podworkers.KillPodOptions{GracePeriodOverride: &grace}}, e.now)
}

// next expects a step of the given state for uid.
func (e *machineEnv) next(uid types.UID, want podworkers.State) podworkers.Step {
	e.t.Helper()
	s, ok := e.m.Next(uid, e.now)
	if !ok {
		e.t.Fatalf("no step for %s, want a %v step", uid, want)
	}
	if s.State != want {
		e.t.Fatalf("step %+v, want a %v step", s, want)
	}
	return s
}

func (e *machineEnv) none(uid types.UID) {
	e.t.Helper()
	if s, ok := e.m.Next(uid, e.now); ok {
		e.t.Fatalf("unexpected step %+v", s)
	}
}

func (e *machineEnv) finish(uid types.UID, res podworkers.StepResult) podworkers.FinishEffect {
	return e.m.Finish(uid, res, e.now)
}

func TestMachineCoalescesUpdatesWhileAStepRuns(t *testing.T) {
	e := newMachine(t)
	p := pod("a", "v1")
	if eff := e.update(podworkers.SyncPodCreate, p); !eff.Created {
		t.Fatalf("%+v: the first update creates the pod", eff)
	}
	e.next(p.UID, podworkers.Syncing)
	e.none(p.UID) // one step at a time
	for _, img := range []string{"v2", "v3", "v4"} {
		e.update(podworkers.SyncPodUpdate, pod("a", img))
	}
	e.update(podworkers.SyncPodSync, pod("a", "v4")) // never replaces a more important update
	e.none(p.UID)
	e.finish(p.UID, podworkers.StepResult{})
	s := e.next(p.UID, podworkers.Syncing)
	if image(s.Pod) != "v4" || s.UpdateType != podworkers.SyncPodUpdate {
		t.Errorf("step %v %s, want one update step with v4", s.UpdateType, image(s.Pod))
	}
	e.finish(p.UID, podworkers.StepResult{})
	e.none(p.UID)
}

func TestMachineLifecycleWithShortestGrace(t *testing.T) {
	e := newMachine(t)
	p := pod("a", "v1")
	e.update(podworkers.SyncPodCreate, p)
	e.next(p.UID, podworkers.Syncing)
	if eff := e.kill(p, 10); !eff.Cancel {
		t.Errorf("%+v: a kill during SyncPod cancels it", eff)
	}
	e.kill(p, 5)
	e.kill(p, 60)
	e.update(podworkers.SyncPodUpdate, pod("a", "v2"))
	e.finish(p.UID, podworkers.StepResult{Err: errStep}) // the cancelled sync
	s := e.next(p.UID, podworkers.Terminating)
	if s.GracePeriod != 5 {
		t.Errorf("grace %d, want the shortest, 5", s.GracePeriod)
	}
	if e.finish(p.UID, podworkers.StepResult{Err: errStep}); !e.m.RetryAt(p.UID).Equal(e.now.Add(10 * time.Second)) {
		t.Errorf("retry at %v, want 10 s later: the failed sync does not count against the termination", e.m.RetryAt(p.UID).Sub(e.now))
	}
	e.now = e.now.Add(10 * time.Second)
	e.next(p.UID, podworkers.Terminating)
	if eff := e.kill(p, 5); eff.Cancel {
		t.Error("a kill with the same grace period cancels the terminating step")
	}
	if eff := e.kill(p, 1); !eff.Cancel {
		t.Errorf("%+v: a kill with a shorter grace period cancels the terminating step", eff)
	}
	e.finish(p.UID, podworkers.StepResult{Err: errStep}) // the cancelled kill
	if s := e.next(p.UID, podworkers.Terminating); s.GracePeriod != 1 {
		t.Errorf("grace %d, want the kill's 1 at once", s.GracePeriod)
	}
	e.finish(p.UID, podworkers.StepResult{})
	e.next(p.UID, podworkers.Terminated)
	if st, _ := e.m.PodState(p.UID); st != podworkers.Terminated || e.m.Finished(p.UID) {
		t.Errorf("state %v finished %v, want terminated and not finished", st, e.m.Finished(p.UID))
	}
	if eff := e.finish(p.UID, podworkers.StepResult{}); !eff.Finished {
		t.Errorf("%+v, want finished", eff)
	}
	if eff := e.update(podworkers.SyncPodUpdate, p); !eff.Ignored {
		t.Error("a finished pod took an update")
	}
	e.none(p.UID)
}

func TestMachineTerminalPhase(t *testing.T) {
	e := newMachine(t)
	p := pod("job", "v1")
	e.update(podworkers.SyncPodCreate, p)
	e.next(p.UID, podworkers.Syncing)
	e.finish(p.UID, podworkers.StepResult{Terminal: true})
	if s := e.next(p.UID, podworkers.Terminating); s.GracePeriod != 30 {
		t.Errorf("grace %d, want the spec's 30 for a pod that finished", s.GracePeriod)
	}
	// A spec already in a terminal phase terminates at once.
	done := pod("done", "v1")
	done.Status.Phase = v1.PodSucceeded
	e.update(podworkers.SyncPodCreate, done)
	if s := e.next(done.UID, podworkers.Terminating); s.GracePeriod != 30 {
		t.Errorf("grace %d, want the spec's 30", s.GracePeriod)
	}
	// So does a deleted one, with the deletion's grace period.
	del := pod("del", "v1")
	del.DeletionTimestamp = &metav1.Time{Time: t0}
	del.DeletionGracePeriodSeconds = ptr.To[int64](7)
	e.update(podworkers.SyncPodCreate, del)
	if s := e.next(del.UID, podworkers.Terminating); s.GracePeriod != 7 {
		t.Errorf("grace %d, want the deletion's 7", s.GracePeriod)
	}
}

func TestMachineRestartRequestedAfterTermination(t *testing.T) {
	e := newMachine(t)
	p := pod("a", "v1")
	e.update(podworkers.SyncPodCreate, p)
	e.next(p.UID, podworkers.Syncing)
	e.finish(p.UID, podworkers.StepResult{})
	e.kill(p, 30)
	e.next(p.UID, podworkers.Terminating)
	if eff := e.update(podworkers.SyncPodCreate, p); !eff.Ignored {
		t.Error("a create during termination acted")
	}
	if kills := e.m.SyncKnownPods(map[types.UID]bool{p.UID: true}); len(kills) != 0 {
		t.Errorf("kills %v", kills)
	}
	if _, ok := e.m.PodState(p.UID); !ok {
		t.Fatal("an unfinished pod was forgotten")
	}
	e.finish(p.UID, podworkers.StepResult{})
	e.next(p.UID, podworkers.Terminated)
	e.finish(p.UID, podworkers.StepResult{})
	e.m.SyncKnownPods(map[types.UID]bool{p.UID: true})
	if _, ok := e.m.PodState(p.UID); ok {
		t.Fatal("a finished pod created again is kept")
	}
	if eff := e.update(podworkers.SyncPodCreate, p); !eff.Created {
		t.Errorf("%+v: the pod starts afresh", eff)
	}
	e.next(p.UID, podworkers.Syncing)
}

func TestMachineSyncKnownPodsKillsUndesired(t *testing.T) {
	e := newMachine(t)
	a, b := pod("a", "v1"), pod("b", "v1")
	for _, p := range []*v1.Pod{a, b} {
		e.update(podworkers.SyncPodCreate, p)
		e.next(p.UID, podworkers.Syncing)
		e.finish(p.UID, podworkers.StepResult{})
	}
	kills := e.m.SyncKnownPods(map[types.UID]bool{a.UID: true})
	if len(kills) != 1 || kills[0].Pod != b || kills[0].UpdateType != podworkers.SyncPodKill {
		t.Fatalf("kills %+v, want b's", kills)
	}
	e.m.Update(kills[0], e.now)
	e.next(b.UID, podworkers.Terminating)
}

func TestMachineOneStaticPodPerName(t *testing.T) {
	e := newMachine(t)
	static := func(uid string) *v1.Pod {
		p := pod("web-node", "v1")
		p.UID = types.UID(uid)
		p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
		return p
	}
	old, repl := static("old"), static("new")
	e.update(podworkers.SyncPodCreate, old)
	e.next(old.UID, podworkers.Syncing)
	e.update(podworkers.SyncPodCreate, repl)
	e.none(repl.UID)
	e.finish(old.UID, podworkers.StepResult{})
	e.kill(old, 30)
	e.next(old.UID, podworkers.Terminating)
	e.finish(old.UID, podworkers.StepResult{})
	e.next(old.UID, podworkers.Terminated)
	e.none(repl.UID)
	if eff := e.finish(old.UID, podworkers.StepResult{}); eff.Unblocked != repl.UID {
		t.Fatalf("%+v, want the replacement unblocked", eff)
	}
	e.next(repl.UID, podworkers.Syncing)
}

func TestMachineOrphans(t *testing.T) {
	e := newMachine(t)
	running := &runtime.Pod{ID: "orphan", Name: "x", Namespace: "ns"}
	for _, typ := range []podworkers.UpdateType{podworkers.SyncPodCreate, podworkers.SyncPodUpdate, podworkers.SyncPodSync} {
		if eff := e.m.Update(podworkers.UpdatePodOptions{UpdateType: typ, RunningPod: running}, e.now); !eff.Ignored || eff.Created {
			t.Errorf("%v of an orphan: %+v, want ignored", typ, eff)
		}
	}
	e.m.Update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, RunningPod: running}, e.now)
	s := e.next(running.ID, podworkers.Terminating)
	if s.Pod != nil || s.RunningPod != running {
		t.Errorf("step %+v, want the runtime pod", s)
	}
	if eff := e.finish(running.ID, podworkers.StepResult{}); !eff.Finished {
		t.Errorf("%+v: an orphan is done once killed", eff)
	}
}

// A syncing pod's failures are reported by Due after a back-off that
// doubles from 10 s up to the resync interval, 1 min, and starts again
// from 10 s after a success.
func TestMachineSyncBackOffGrowsAndResets(t *testing.T) {
	e := newMachine(t)
	e.m = podworkers.NewMachine(podworkers.MachineConfig{MaxBackOffPeriod: time.Minute})
	p := pod("a", "v1")
	e.update(podworkers.SyncPodCreate, p)
	for _, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute, 0, 10 * time.Second} {
		e.next(p.UID, podworkers.Syncing)
		res := podworkers.StepResult{Err: errStep}
		if want == 0 {
			res, want = podworkers.StepResult{}, time.Minute // a success: the resync interval
		}
		e.finish(p.UID, res)
		if due := e.m.Due(e.now.Add(want - time.Nanosecond)); len(due) != 0 {
			t.Fatalf("due before %v: %v", want, due)
		}
		e.now = e.now.Add(want)
		if due := e.m.Due(e.now); len(due) != 1 {
			t.Fatalf("not due after %v", want)
		}
		if due := e.m.Due(e.now); len(due) != 0 {
			t.Fatal("due twice")
		}
		e.update(podworkers.SyncPodSync, p) // what the sync loop does
	}
}

// A failed terminating or terminated step is retried by the machine
// itself, after the back-off, without any update: the caller may have
// forgotten the pod's spec.
func TestMachineRetriesTerminationItself(t *testing.T) {
	e := newMachine(t)
	p := pod("a", "v1")
	e.update(podworkers.SyncPodCreate, p)
	e.next(p.UID, podworkers.Syncing)
	e.finish(p.UID, podworkers.StepResult{})
	e.kill(p, 30)
	for _, st := range []podworkers.State{podworkers.Terminating, podworkers.Terminated} {
		for _, wait := range []time.Duration{10 * time.Second, 10 * time.Second} {
			e.next(p.UID, st)
			e.finish(p.UID, podworkers.StepResult{Err: errStep})
			if at := e.m.RetryAt(p.UID); !at.Equal(e.now.Add(wait)) {
				t.Fatalf("retry at %v, want %v later", at.Sub(e.now), wait)
			}
			if due := e.m.Due(e.now.Add(time.Hour)); len(due) != 0 {
				t.Fatalf("Due reports a terminating pod: %v", due)
			}
			e.now = e.now.Add(wait - time.Nanosecond)
			e.none(p.UID)
			e.now = e.now.Add(time.Nanosecond)
		}
		e.next(p.UID, st)
		e.finish(p.UID, podworkers.StepResult{})
	}
	if !e.m.Finished(p.UID) {
		t.Error("not finished")
	}
}

// A failed status read does not move the view time: the next step waits
// for a view newer than the last step that ran.
func TestMachineStatusUnreadKeepsTheViewTime(t *testing.T) {
	e := newMachine(t)
	p := pod("a", "v1")
	e.update(podworkers.SyncPodCreate, p)
	e.next(p.UID, podworkers.Syncing)
	e.now = e.now.Add(time.Second)
	e.finish(p.UID, podworkers.StepResult{})
	e.update(podworkers.SyncPodSync, p)
	e.now = e.now.Add(time.Second)
	if s := e.next(p.UID, podworkers.Syncing); !s.StatusNewerThan.Equal(t0.Add(time.Second)) {
		t.Fatalf("newer than %v", s.StatusNewerThan)
	}
	e.finish(p.UID, podworkers.StepResult{Err: errStep, StatusUnread: true})
	e.update(podworkers.SyncPodSync, p)
	if s := e.next(p.UID, podworkers.Syncing); !s.StatusNewerThan.Equal(t0.Add(time.Second)) {
		t.Fatalf("newer than %v after a failed read, want the last step's end", s.StatusNewerThan)
	}
}

// An update that arrives while a failed terminating step waits for its
// back-off runs the step at once.
func TestMachineUpdateDuringBackOffRunsAtOnce(t *testing.T) {
	e := newMachine(t)
	p := pod("a", "v1")
	e.kill(p, 30)
	e.next(p.UID, podworkers.Terminating)
	e.finish(p.UID, podworkers.StepResult{Err: errStep})
	e.none(p.UID)
	e.kill(p, 2)
	if s := e.next(p.UID, podworkers.Terminating); s.GracePeriod != 2 {
		t.Errorf("grace %d, want 2", s.GracePeriod)
	}
}

// By default every failed sync is retried after BackOffPeriod, as the
// kubelet does; a refusal for a running back-off is retried when that
// back-off ends (never later than the resync interval).
func TestMachineSyncRetryFollowsTheBackOffError(t *testing.T) {
	e := newMachine(t)
	p := pod("a", "v1")
	e.update(podworkers.SyncPodCreate, p)
	for i, tc := range []struct {
		backOff time.Duration // 0: a plain error
		want    time.Duration
	}{
		{0, 10 * time.Second},
		{0, 10 * time.Second}, // no growth by default
		{40 * time.Second, 40 * time.Second},
		{5 * time.Minute, time.Minute}, // capped at the resync interval
		{-time.Second, 0},              // already over: at once
	} {
		e.next(p.UID, podworkers.Syncing)
		err := errStep
		if tc.backOff != 0 {
			until := e.now.Add(tc.backOff)
			err = fmt.Errorf("sync: %w", errors.Join(errStep, &runtime.BackOffError{Err: errors.New("CrashLoopBackOff"), Until: until}))
		}
		e.finish(p.UID, podworkers.StepResult{Err: err})
		if tc.want > 0 {
			if due := e.m.Due(e.now.Add(tc.want - time.Nanosecond)); len(due) != 0 {
				t.Fatalf("step %d: due before %v", i, tc.want)
			}
		}
		e.now = e.now.Add(tc.want)
		if due := e.m.Due(e.now); len(due) != 1 {
			t.Fatalf("step %d: not due after %v", i, tc.want)
		}
		e.update(podworkers.SyncPodSync, p)
	}
}

// NextDue is the earliest time Due reports a pod: the resyncs and retries
// of syncing pods, never those of terminating ones.
func TestMachineNextDueIsTheEarliestResync(t *testing.T) {
	e := newMachine(t)
	if at, ok := e.m.NextDue(); ok {
		t.Fatalf("an empty machine is due at %v", at)
	}
	a, b, c := pod("a", "v1"), pod("b", "v1"), pod("c", "v1")
	for _, p := range []*v1.Pod{a, b, c} {
		e.update(podworkers.SyncPodCreate, p)
		e.next(p.UID, podworkers.Syncing)
	}
	if at, ok := e.m.NextDue(); ok {
		t.Fatalf("due at %v while every first sync runs", at)
	}
	if eff := e.finish(a.UID, podworkers.StepResult{}); !eff.Due.Equal(t0.Add(time.Minute)) {
		t.Errorf("a's finish says due at %v, want the resync a minute later", eff.Due)
	}
	if eff := e.finish(b.UID, podworkers.StepResult{Err: errStep}); !eff.Due.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("b's finish says due at %v, want the retry 10s later", eff.Due)
	}
	e.finish(c.UID, podworkers.StepResult{})
	if at, ok := e.m.NextDue(); !ok || !at.Equal(t0.Add(10*time.Second)) {
		t.Errorf("NextDue %v %v, want b's retry 10s later", at, ok)
	}
	// b terminates: its retry is no longer a due time.
	e.kill(b, 30)
	if at, ok := e.m.NextDue(); !ok || !at.Equal(t0.Add(time.Minute)) {
		t.Errorf("NextDue %v %v, want the resyncs a minute later", at, ok)
	}
	if got := len(e.m.Due(t0.Add(time.Minute))); got != 2 {
		t.Errorf("Due a minute later reports %d pods, want a and c", got)
	}
	if at, ok := e.m.NextDue(); ok {
		t.Errorf("due at %v once every due pod was reported", at)
	}
}

// SyncBy makes a syncing pod due before its resync; the request is
// served once and replaced by the next; a terminating pod ignores it.
func TestMachineSyncByComesBeforeTheResync(t *testing.T) {
	e := newMachine(t)
	p := pod("a", "v1")
	e.update(podworkers.SyncPodCreate, p)
	e.next(p.UID, podworkers.Syncing)
	// Asked during the step, as the agent asks for a pod's deadline.
	if at := e.m.SyncBy(p.UID, t0.Add(30*time.Second)); !at.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("SyncBy says due at %v, want 30s", at)
	}
	if eff := e.finish(p.UID, podworkers.StepResult{}); !eff.Due.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("finish says due at %v, want the request 30s later, before the resync", eff.Due)
	}
	if due := e.m.Due(t0.Add(30*time.Second - time.Nanosecond)); len(due) != 0 {
		t.Fatalf("due before the request: %v", due)
	}
	if due := e.m.Due(t0.Add(30 * time.Second)); len(due) != 1 {
		t.Fatalf("Due at the request reports %v, want the pod", due)
	}
	if at, ok := e.m.NextDue(); ok {
		t.Errorf("due again at %v once reported, before its sync ran", at)
	}
	// A request later than the resync leaves the resync first; a zero
	// one withdraws it.
	e.now = t0.Add(30 * time.Second)
	e.update(podworkers.SyncPodSync, p)
	e.next(p.UID, podworkers.Syncing)
	e.m.SyncBy(p.UID, e.now.Add(2*time.Minute))
	if eff := e.finish(p.UID, podworkers.StepResult{}); !eff.Due.Equal(e.now.Add(time.Minute)) {
		t.Errorf("finish says due at %v, want the resync", eff.Due)
	}
	if due := e.m.Due(e.now.Add(time.Minute)); len(due) != 1 {
		t.Fatalf("Due at the resync reports %v", due)
	}
	if at, ok := e.m.NextDue(); !ok || !at.Equal(e.now.Add(2*time.Minute)) {
		t.Errorf("NextDue %v %v, want the request, kept past the resync", at, ok)
	}
	e.m.SyncBy(p.UID, time.Time{})
	if at, ok := e.m.NextDue(); ok {
		t.Errorf("due at %v after the request was withdrawn", at)
	}
	e.m.SyncBy(p.UID, e.now.Add(time.Second))
	e.kill(p, 30)
	if at := e.m.SyncBy(p.UID, e.now.Add(time.Second)); !at.IsZero() {
		t.Errorf("a terminating pod took a request: due at %v", at)
	}
	if at, ok := e.m.NextDue(); ok {
		t.Errorf("a terminating pod is due at %v", at)
	}
}
