package agent_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// hungGC is a runtime whose garbage collection hangs until its context
// ends, and which records how many collections ran at once.
type hungGC struct {
	runtime.Runtime
	mu                    sync.Mutex
	calls, now, maxAtOnce int
}

func (h *hungGC) GarbageCollect(ctx context.Context, _ runtime.GCPolicy, _ func(types.UID) bool) error {
	h.mu.Lock()
	h.calls++
	h.now++
	h.maxAtOnce = max(h.maxAtOnce, h.now)
	h.mu.Unlock()
	<-ctx.Done()
	h.mu.Lock()
	h.now--
	h.mu.Unlock()
	return ctx.Err()
}

func (h *hungGC) stats() (calls, maxAtOnce int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls, h.maxAtOnce
}

// Container GC runs on its own goroutine: one that hangs does not stop
// pods from being synced, and it never overlaps itself.
func TestHungContainerGCDoesNotStopPodSyncs(t *testing.T) {
	dir := manifestDir(t)
	fake := newFake(t)
	rt, err := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, NodeName: "node",
		PodLogsDir: filepath.Join(dir, "..", "logs"), PodsDir: filepath.Join(dir, "..", "pods"), ResolvConf: "-"})
	if err != nil {
		t.Fatal(err)
	}
	gc := &hungGC{Runtime: rt}
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "node", Period: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName: "node", Runtime: gc, Sources: []podsource.Source{src},
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 20 * time.Millisecond, ContainerGCPeriod: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	eventually(t, "a collection hangs", func() bool { calls, _ := gc.stats(); return calls > 0 })
	writeManifest(t, dir, "web", "Always")
	eventually(t, "the pod added after the hung collection runs", func() bool {
		for _, p := range a.Pods() {
			if p.Name == "web-node" && p.Status.Phase == v1.PodRunning {
				return true
			}
		}
		return false
	})
	if calls, atOnce := gc.stats(); calls != 1 || atOnce != 1 {
		t.Errorf("%d collections started, %d at once; want 1 and 1 while the first hangs", calls, atOnce)
	}
}
