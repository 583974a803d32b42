package pleg_test

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// listOnly is a runtime whose GetPods returns a fixed list, so that a
// benchmark measures the relist's own work, not the CRI list calls.
type listOnly struct {
	runtime.Runtime
	pods []*runtime.Pod
}

func (l *listOnly) GetPods(context.Context, bool) ([]*runtime.Pod, error) { return l.pods, nil }

func (l *listOnly) GetPodStatus(_ context.Context, uid types.UID, _, _ string) (*runtime.PodStatus, error) {
	return &runtime.PodStatus{ID: uid}, nil
}

// BenchmarkRelistUnchanged relists 1000 running pods whose state did not
// change: the cost the relist adds to the runtime's own list calls.
func BenchmarkRelistUnchanged(b *testing.B) {
	rt := &listOnly{}
	for i := range 1000 {
		id := func(kind string) runtime.ContainerID {
			return runtime.ContainerID{Type: "fake", ID: fmt.Sprintf("%s-%d", kind, i)}
		}
		rt.pods = append(rt.pods, &runtime.Pod{ID: types.UID(fmt.Sprint("uid-", i)), Name: fmt.Sprint("p", i), Namespace: "ns",
			Sandboxes:  []*runtime.Container{{ID: id("sandbox"), State: runtime.ContainerStateRunning}},
			Containers: []*runtime.Container{{ID: id("c"), Name: "c", State: runtime.ContainerStateRunning}}})
	}
	gen, err := pleg.NewGeneric(pleg.Config{Runtime: rt, Cache: pleg.NewCache(), EventBuffer: 4000})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	gen.Relist(ctx) // the first relist inspects every pod
	for len(gen.Watch()) > 0 {
		<-gen.Watch()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		gen.Relist(ctx)
	}
	if n := len(gen.Watch()); n != 0 {
		b.Fatalf("%d events from unchanged pods", n)
	}
}
