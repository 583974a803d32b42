package agent

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// runContainerGC collects dead containers every Config.ContainerGCPeriod
// on its own goroutine, as the kubelet does, so a slow collection never
// holds up the sync loop. A collection runs to its end before the next
// one starts (ticks that come meanwhile are dropped). It returns nil when
// ctx ends, and at once when the runtime does not collect garbage.
func (a *Agent) runContainerGC(ctx context.Context) error {
	gc, ok := a.rt.(runtime.GarbageCollector)
	if !ok {
		return nil
	}
	t := a.cfg.Clock.NewTicker(a.cfg.ContainerGCPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if err := a.collectContainers(ctx, gc, *a.cfg.GCPolicy); err != nil && ctx.Err() == nil {
				a.log.Error(err, "collecting dead containers")
			}
		}
	}
}

// collectContainers removes dead containers beyond policy; those of a
// pod are all removable once no source wants the pod and its worker is
// done with it. Nothing is collected before every source has been seen.
// Collections (periodic, or the eviction manager's reclaim) run one at a
// time.
func (a *Agent) collectContainers(ctx context.Context, gc runtime.GarbageCollector, policy runtime.GCPolicy) error {
	if !a.merger.SeenAllSources() {
		return nil
	}
	a.gcMu.Lock()
	defer a.gcMu.Unlock()
	a.mu.Lock()
	want := make(map[types.UID]bool, len(a.pods))
	for uid := range a.pods {
		want[uid] = true
	}
	a.mu.Unlock()
	for _, p := range a.merger.Pods() { // wanted even while its ADD is queued
		want[p.UID] = true
	}
	gone := func(uid types.UID) bool { return !want[uid] && a.workers.ShouldPodContentBeRemoved(uid) }
	if err := gc.GarbageCollect(ctx, policy, gone); err != nil {
		return fmt.Errorf("agent: container GC: %w", err)
	}
	return nil
}
