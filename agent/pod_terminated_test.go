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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// terminations records Config.PodTerminated calls: per pod name, the
// number of calls, whether the pod had a deletionTimestamp and how many
// of its containers the runtime still ran at the time. The first failN
// calls fail.
type terminations struct {
	fake  *fakecri.Runtime
	mu    sync.Mutex
	calls map[string]int
	ok    map[string]int
	seen  []string
	failN int
}

func (r *terminations) hook(ctx context.Context, pod *v1.Pod) error {
	cs, err := r.fake.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{cri.LabelPodUID: string(pod.UID)},
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[pod.Name]++
	r.seen = append(r.seen, fmt.Sprintf("%s deleted=%v running=%d err=%v", pod.Name, pod.DeletionTimestamp != nil, len(cs), err))
	if r.failN > 0 {
		r.failN--
		return errors.New("API server away")
	}
	r.ok[pod.Name]++
	return nil
}

func (r *terminations) describe() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%q", r.seen)
}

// runWithTerminations runs an agent on fakecri, fed by a channel source,
// whose PodTerminated hook is recorded and fails its first failN calls.
func runWithTerminations(t *testing.T, failN int) (*fidelity, *terminations) {
	t.Helper()
	fake := newFake(t)
	dir := t.TempDir()
	rec := &terminations{fake: fake, calls: map[string]int{}, ok: map[string]int{}, failN: failN}
	api := podsource.NewChannel("api", 16)
	h := &history{}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{api}, StatusSink: h,
		PodTerminated: rec.hook,
		RelistPeriod:  20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	return &fidelity{t: t, fake: fake, api: api, history: h}, rec
}

// PodTerminated is called once a deleted pod's containers are gone, with
// the pod as deleted, again after it fails, and never again once it
// succeeded; a pod still running never reaches it.
func TestPodTerminatedHook(t *testing.T) {
	f, rec := runWithTerminations(t, 2)
	f.send(podsource.SET)
	gone := apiPod("gone", v1.RestartPolicyAlways, []string{"main", "side"})
	stays := apiPod("stays", v1.RestartPolicyAlways, []string{"main"})
	f.send(podsource.ADD, gone, stays)
	for _, p := range []*v1.Pod{gone, stays} {
		f.waitFor(p.Name, "runs", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	}
	f.delete(gone)
	eventuallyShowing(t, "PodTerminated succeeds for gone", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.ok["gone"] == 1
	}, rec.describe)
	// More housekeeping and relists pass: no further call.
	f.send(podsource.RECONCILE, stays)
	f.waitFor("stays", "still runs", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []string{
		"gone deleted=true running=0 err=<nil>",
		"gone deleted=true running=0 err=<nil>",
		"gone deleted=true running=0 err=<nil>",
	}
	if fmt.Sprint(rec.seen) != fmt.Sprint(want) {
		t.Errorf("PodTerminated calls = %q, want %q (two failures retried, then one success, never for a running pod)", rec.seen, want)
	}
}

// A pod that finished on its own before its deletion arrived gets a
// second PodTerminated call, with its deletionTimestamp, at housekeeping;
// then no more.
func TestPodTerminatedAfterFinish(t *testing.T) {
	f, rec := runWithTerminations(t, 0)
	f.send(podsource.SET)
	job := apiPod("job", v1.RestartPolicyNever, []string{"main"}, fakecri.EnvExitCode, "0")
	f.send(podsource.ADD, job)
	f.waitFor("job", "succeeds", func(s v1.PodStatus) bool { return s.Phase == v1.PodSucceeded })
	eventuallyShowing(t, "PodTerminated for the finished pod", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.ok["job"] == 1
	}, rec.describe)
	rec.mu.Lock()
	rec.failN = 1 // the call at the first housekeeping after the deletion fails
	rec.mu.Unlock()
	f.delete(job)
	eventuallyShowing(t, "PodTerminated for the deleted pod", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.ok["job"] == 2
	}, rec.describe)
	// Housekeeping goes on: the REMOVE of the deleted pod is its last word.
	f.send(podsource.REMOVE, job)
	f.send(podsource.RECONCILE)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []string{
		"job deleted=false running=0 err=<nil>",
		"job deleted=true running=0 err=<nil>",
		"job deleted=true running=0 err=<nil>",
	}
	if fmt.Sprint(rec.seen) != fmt.Sprint(want) {
		t.Errorf("PodTerminated calls = %q, want %q", rec.seen, want)
	}
}
