package server_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeNode is the node a server serves: its pods, and what the runtime
// observes of them.
type fakeNode struct {
	mu       sync.Mutex
	pods     []*v1.Pod
	statuses map[types.UID]*runtime.PodStatus
	running  []*runtime.Pod
	asked    int // GetPodStatus calls
}

func newFakeNode() *fakeNode { return &fakeNode{statuses: map[types.UID]*runtime.PodStatus{}} }

// addPod adds pod ns/name with one container "app" whose instances (newest
// first) log to the given paths and are in the given states.
func (f *fakeNode) addPod(ns, name string, uid types.UID, instances ...*runtime.ContainerStatus) *v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
	}
	f.pods = append(f.pods, pod)
	f.statuses[uid] = &runtime.PodStatus{
		ID: uid, Name: name, Namespace: ns, ContainerStatuses: instances,
		SandboxStatuses: []*runtime.SandboxStatus{{ID: "sandbox-" + string(uid), State: runtime.SandboxStateReady}},
	}
	return pod
}

func (f *fakeNode) setState(uid types.UID, state runtime.ContainerState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses[uid].ContainerStatuses[0].State = state
}

func (f *fakeNode) Pods() []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*v1.Pod(nil), f.pods...)
}

func (f *fakeNode) GetPods(context.Context, bool) ([]*runtime.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running, nil
}

func (f *fakeNode) GetPodStatus(_ context.Context, uid types.UID, _, _ string) (*runtime.PodStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	st, ok := f.statuses[uid]
	if !ok {
		return nil, errors.New("no such pod")
	}
	c := *st
	c.ContainerStatuses = nil
	for _, cs := range st.ContainerStatuses {
		cc := *cs
		c.ContainerStatuses = append(c.ContainerStatuses, &cc)
	}
	return &c, nil
}

func (f *fakeNode) statusCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}
