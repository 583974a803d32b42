package cri_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// listCounter is a fakecri that counts the sandboxes and containers its
// list calls return, by the pod UID label they carry.
type listCounter struct {
	*fakecri.Runtime
	mu     sync.Mutex
	listed map[string]int // pod UID -> objects returned by list calls
}

func (l *listCounter) count(labels map[string]string) {
	l.listed[labels[cri.LabelPodUID]]++
}

func (l *listCounter) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	out, err := l.Runtime.ListPodSandbox(ctx, f)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range out {
		l.count(s.GetLabels())
	}
	return out, err
}

func (l *listCounter) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	out, err := l.Runtime.ListContainers(ctx, f)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range out {
		l.count(c.GetLabels())
	}
	return out, err
}

func (l *listCounter) reset() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.listed
	l.listed = map[string]int{}
	return out
}

// KillPod without a running pod looks the pod up by its UID label, so
// killing one pod lists that pod's sandboxes and containers only, not
// every pod on the node (which made mass deletion quadratic).
func TestKillPodWithoutRunningPodListsOnlyThatPod(t *testing.T) {
	fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
	if err != nil {
		t.Fatal(err)
	}
	lc := &listCounter{Runtime: fake, listed: map[string]int{}}
	rt, err := cri.New(cri.Config{RuntimeService: lc, ImageService: lc, PodLogsDir: t.TempDir(), PodsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var pods []*v1.Pod
	for i := range 5 {
		pod := testPod(v1.RestartPolicyAlways, nil, "a", "b")
		pod.Name, pod.UID = fmt.Sprint("p", i), types.UID(fmt.Sprint("uid-", i))
		if res := rt.SyncPod(ctx, pod, nil); res.Error() != nil {
			t.Fatal(res.Error())
		}
		pods = append(pods, pod)
	}
	lc.reset()

	victim := pods[2]
	if err := rt.KillPod(ctx, victim, nil, nil); err != nil {
		t.Fatal(err)
	}
	listed := lc.reset()
	// The victim's sandbox and its two containers.
	if want := map[string]int{string(victim.UID): 3}; fmt.Sprint(listed) != fmt.Sprint(want) {
		t.Errorf("KillPod listed %v (objects per pod UID), want only the victim's: %v", listed, want)
	}
	st, err := rt.GetPodStatus(ctx, victim.UID, victim.Name, victim.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.ContainerStatuses {
		if c.State != runtime.ContainerStateExited {
			t.Errorf("container %s of the killed pod is %s", c.Name, c.State)
		}
	}
	if len(st.SandboxStatuses) != 1 || st.SandboxStatuses[0].State != runtime.SandboxStateNotReady {
		t.Errorf("sandboxes of the killed pod: %+v, want one, not ready", st.SandboxStatuses)
	}
	// The other pods are untouched.
	for _, p := range []*v1.Pod{pods[1], pods[3]} {
		st, err := rt.GetPodStatus(ctx, p.UID, p.Name, p.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if c := st.FindContainerStatus("a"); c == nil || c.State != runtime.ContainerStateRunning {
			t.Errorf("pod %s: container a %+v, want running", p.Name, c)
		}
	}

	// A pod the runtime does not know is killed with nothing to do.
	lc.reset()
	ghost := testPod(v1.RestartPolicyAlways, nil, "a")
	ghost.UID = "uid-ghost"
	if err := rt.KillPod(ctx, ghost, nil, nil); err != nil {
		t.Errorf("KillPod of an unknown pod: %v", err)
	}
	if listed := lc.reset(); len(listed) != 0 {
		t.Errorf("KillPod of an unknown pod listed %v, want nothing", listed)
	}
}

// BenchmarkKillPodLookup measures KillPod of a pod given without its
// running pod (its containers already exited, so the lookup dominates) on
// a node of n pods in the in-memory runtime. The cost does not grow with
// the number of other pods beyond what the runtime's label filter costs.
func BenchmarkKillPodLookup(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprint("pods=", n), func(b *testing.B) {
			fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
			if err != nil {
				b.Fatal(err)
			}
			rt, err := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: b.TempDir(), PodsDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var pod *v1.Pod
			for i := range n {
				pod = testPod(v1.RestartPolicyAlways, nil, "a", "b")
				pod.Name, pod.UID = fmt.Sprint("p", i), types.UID(fmt.Sprint("uid-", i))
				if res := rt.SyncPod(ctx, pod, nil); res.Error() != nil {
					b.Fatal(res.Error())
				}
			}
			if err := rt.KillPod(ctx, pod, nil, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := rt.KillPod(ctx, pod, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
