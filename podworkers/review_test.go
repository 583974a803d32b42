package podworkers_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podworkers"
)

func staticPod(uid, img string) *v1.Pod {
	p := pod("web-node", img)
	p.UID = types.UID(uid)
	p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	return p
}

// A static pod killed while it waits for its predecessor never started:
// it has nothing to stop, so it is finished at once with no step, and is
// forgotten once no longer desired, though its predecessor keeps running.
func TestMachineStaticPodKilledWhileWaitingFinishesAtOnce(t *testing.T) {
	e := newMachine(t)
	running, waiting := staticPod("running", "v1"), staticPod("waiting", "v2")
	e.update(podworkers.SyncPodCreate, running)
	e.next(running.UID, podworkers.Syncing)
	e.finish(running.UID, podworkers.StepResult{})
	e.update(podworkers.SyncPodCreate, waiting)
	e.none(waiting.UID)
	e.kill(waiting, 30)
	e.none(waiting.UID)
	if !e.m.Finished(waiting.UID) {
		st, _ := e.m.PodState(waiting.UID)
		t.Fatalf("the killed waiting pod is %v and not finished: it would wait for its predecessor to end", st)
	}
	e.m.SyncKnownPods(map[types.UID]bool{running.UID: true})
	if _, ok := e.m.PodState(waiting.UID); ok {
		t.Error("the finished, undesired waiting pod is kept")
	}
	// The next replacement waits only for the running pod, and starts once
	// it is gone.
	next := staticPod("next", "v3")
	e.update(podworkers.SyncPodCreate, next)
	e.none(next.UID)
	e.kill(running, 30)
	e.next(running.UID, podworkers.Terminating)
	e.finish(running.UID, podworkers.StepResult{})
	e.next(running.UID, podworkers.Terminated)
	if eff := e.finish(running.UID, podworkers.StepResult{}); eff.Unblocked != next.UID {
		t.Fatalf("%+v, want %s unblocked", eff, next.UID)
	}
	e.next(next.UID, podworkers.Syncing)
}

// The driver: the killed waiting static pod's content may be removed at
// once, no handler runs for it, and its worker stops.
func TestStaticPodKilledWhileWaitingNeverRuns(t *testing.T) {
	e := newEnv(t)
	running, waiting := staticPod("running", "v1"), staticPod("waiting", "v2")
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: running})
	e.next()
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: waiting})
	e.pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: waiting})
	deadline := time.Now().Add(10 * time.Second)
	for !e.pw.ShouldPodContentBeRemoved(waiting.UID) {
		if time.Now().After(deadline) {
			st, _ := e.pw.PodState(waiting.UID)
			t.Fatalf("the killed waiting pod is %v and not finished while its predecessor runs", st)
		}
		goschedHelper()
	}
	e.quiet()
	if states := e.pw.SyncKnownPods([]*v1.Pod{running}); len(states) != 1 {
		t.Errorf("states %v, want only the running pod", states)
	}
}

// A pod whose SyncPod reports a terminal phase is killed with its own
// grace period, as the kubelet does: its sidecars may still run and get
// their full termination grace period.
func TestMachineTerminalPodKeepsItsGracePeriod(t *testing.T) {
	e := newMachine(t)
	p := pod("job", "v1")
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](45)
	e.update(podworkers.SyncPodCreate, p)
	e.next(p.UID, podworkers.Syncing)
	e.finish(p.UID, podworkers.StepResult{Terminal: true})
	if s := e.next(p.UID, podworkers.Terminating); s.GracePeriod != 45 {
		t.Errorf("grace %d, want the spec's 45", s.GracePeriod)
	}
	// A kill that arrives meanwhile still shortens it.
	q := pod("job2", "v1")
	q.Spec.TerminationGracePeriodSeconds = ptr.To[int64](45)
	e.update(podworkers.SyncPodCreate, q)
	e.next(q.UID, podworkers.Syncing)
	e.finish(q.UID, podworkers.StepResult{Terminal: true})
	e.kill(q, 3)
	if s := e.next(q.UID, podworkers.Terminating); s.GracePeriod != 3 {
		t.Errorf("grace %d, want the kill's 3", s.GracePeriod)
	}
}

// A kill's grace period override only shortens the pod's own (the
// deletion's, else the spec's): a longer override, even on the first
// kill, keeps the pod's, and a resync that follows changes nothing.
func TestMachineKillOverrideNeverLengthens(t *testing.T) {
	e := newMachine(t)
	p := pod("a", "v1") // the spec says 30
	e.update(podworkers.SyncPodCreate, p)
	e.next(p.UID, podworkers.Syncing)
	e.finish(p.UID, podworkers.StepResult{})
	e.kill(p, 60)
	if s := e.next(p.UID, podworkers.Terminating); s.GracePeriod != 30 {
		t.Errorf("grace %d, want the spec's 30: the override of 60 lengthened it", s.GracePeriod)
	}
	e.finish(p.UID, podworkers.StepResult{Err: errStep})
	e.update(podworkers.SyncPodSync, p)
	if s := e.next(p.UID, podworkers.Terminating); s.GracePeriod != 30 {
		t.Errorf("grace %d after a resync, want 30", s.GracePeriod)
	}
	// The deletion's grace period counts as well as the override.
	d := pod("d", "v1")
	d.DeletionTimestamp = &metav1.Time{Time: t0}
	d.DeletionGracePeriodSeconds = ptr.To[int64](5)
	e.kill(d, 60)
	if s := e.next(d.UID, podworkers.Terminating); s.GracePeriod != 5 {
		t.Errorf("grace %d, want the deletion's 5", s.GracePeriod)
	}
}
