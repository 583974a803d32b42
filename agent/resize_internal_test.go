package agent

import (
	"errors"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
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

// A pod its source reports Succeeded or Failed holds no resources for
// admission and resizes, as the kubelet's filterOutInactivePods skips an
// admitted pod whose phase is terminal, even before its worker or the
// status manager knows it (a restarted agent's finished Job pods); one
// that runs does.
func TestActivePodsSkipsPodsTheirSourceReportsFinished(t *testing.T) {
	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.89.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{NodeName: "node", RuntimeService: fake, ImageService: fake,
		Sources: []podsource.Source{podsource.NewChannel("api", 1)},
		CRI:     cri.Config{PodLogsDir: filepath.Join(t.TempDir(), "logs"), PodsDir: filepath.Join(t.TempDir(), "pods"), ResolvConf: "-"}})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name string, phase v1.PodPhase) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}, Status: v1.PodStatus{Phase: phase}}
	}
	a.remember([]*v1.Pod{pod("done", v1.PodSucceeded), pod("failed", v1.PodFailed), pod("web", v1.PodRunning), pod("new", "")})
	var got []string
	for _, p := range a.activePods() {
		got = append(got, p.Name)
	}
	sort.Strings(got)
	if want := []string{"new", "web"}; !slices.Equal(got, want) {
		t.Errorf("active pods %v; want %v", got, want)
	}
}
