package syncloop_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/probes"
	"github.com/nodekit/nodekit/syncloop"
)

// printer prints what the loop dispatches.
type printer struct{ seen chan struct{} }

func (p printer) HandlePodAdditions(_ context.Context, pods []*v1.Pod) {
	fmt.Println("add", pods[0].Name)
	p.seen <- struct{}{}
}
func (p printer) HandlePodUpdates(context.Context, []*v1.Pod) {}
func (p printer) HandlePodRemoves(_ context.Context, pods []*v1.Pod) {
	fmt.Println("remove", pods[0].Name)
	p.seen <- struct{}{}
}
func (printer) HandlePodReconcile(context.Context, []*v1.Pod)    {}
func (printer) HandlePodSyncs(context.Context, []*v1.Pod)        {}
func (printer) HandlePodCleanups(context.Context) error          { return nil }
func (printer) HandleProbeUpdate(context.Context, probes.Update) {}

func Example() {
	updates := make(chan podsource.Update, 2)
	h := printer{seen: make(chan struct{})}
	loop, _ := syncloop.New(syncloop.Config{Handler: h, Updates: updates, Lookup: func(types.UID) (*v1.Pod, bool) { return nil, false }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- loop.Run(ctx) }()

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-web"}}
	updates <- podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{pod}}
	<-h.seen
	updates <- podsource.Update{Op: podsource.REMOVE, Pods: []*v1.Pod{pod}}
	<-h.seen
	cancel()
	<-done
	// Output:
	// add web
	// remove web
}
