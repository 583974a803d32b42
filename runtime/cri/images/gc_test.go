package images_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime/cri/images"
)

// gcNode is a fake runtime for the image collector: images, the
// containers using them, and an image filesystem.
type gcNode struct {
	mu                  sync.Mutex
	images              []*runtimeapi.Image
	using               []string // image IDs of the containers
	removed             []string
	capacity, available uint64
}

func (n *gcNode) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*runtimeapi.Image(nil), n.images...), nil
}

func (n *gcNode) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, img := range n.images {
		if img.Id == spec.Image {
			n.images = append(n.images[:i:i], n.images[i+1:]...)
			n.removed = append(n.removed, spec.Image)
			n.available += img.Size
			return nil
		}
	}
	return nil
}

func (n *gcNode) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*runtimeapi.Container
	for i, id := range n.using {
		out = append(out, &runtimeapi.Container{Id: string(rune('a' + i)), ImageRef: id, State: runtimeapi.ContainerState_CONTAINER_EXITED})
	}
	return out, nil
}

func (n *gcNode) fs(context.Context) (uint64, uint64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.capacity, n.available, nil
}

func (n *gcNode) set(f func(*gcNode)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n)
}

func img(id string, size uint64) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, Size: size, RepoTags: []string{"example.com/" + id + ":1"}}
}

// newGCScene: images old-a and old-b were used in that order and then
// left; in-use is used by an exited container; pinned is pinned; young
// was first seen a minute before the collection.
func newGCScene(t *testing.T, available uint64) (*gcNode, *images.GC, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pinned := img("pinned", 500)
	pinned.Pinned = true
	n := &gcNode{capacity: 1000, available: 900,
		images: []*runtimeapi.Image{img("old-b", 60), img("old-a", 60), img("in-use", 500), pinned}}
	g, err := images.NewGC(images.GCConfig{Images: n, Containers: n, FsUsage: n.fs, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, using := range [][]string{{"old-a"}, {"old-b"}, {"in-use"}} {
		n.set(func(n *gcNode) { n.using = using })
		if err := g.GarbageCollect(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Minute)
	}
	clk.Step(2 * time.Minute)
	n.set(func(n *gcNode) { n.images = append(n.images, img("young", 500)) })
	if err := g.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	n.set(func(n *gcNode) { n.available = available })
	return n, g, clk
}

// Above the high threshold, unused images go least recently used first
// until usage is down to the low threshold; images in use by any
// container, pinned ones and those younger than MinAge stay.
func TestImageGCFreesLeastRecentlyUsedDownToTheLowThreshold(t *testing.T) {
	n, g, _ := newGCScene(t, 100) // 90% used: 1000*20% - 100 = 100 bytes to free
	if err := g.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(n.removed, ","); got != "old-a,old-b" {
		t.Errorf("removed %s, want old-a,old-b (least recently used first)", got)
	}
}

func TestImageGCBelowTheHighThresholdRemovesNothing(t *testing.T) {
	n, g, _ := newGCScene(t, 200) // 80% used
	if err := g.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(n.removed) != 0 {
		t.Errorf("removed %v below the high threshold", n.removed)
	}
}

func TestImageGCReportsWhatItCouldNotFree(t *testing.T) {
	n, g, _ := newGCScene(t, 10) // 99% used: 190 bytes to free, 120 eligible
	err := g.GarbageCollect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "attempted to free 190 bytes, but only found 120 bytes eligible to free") {
		t.Errorf("GarbageCollect = %v", err)
	}
	if got := strings.Join(n.removed, ","); got != "old-a,old-b" {
		t.Errorf("removed %s, want old-a,old-b", got)
	}
}

// DeleteUnused, the eviction manager's reclaim, removes every unused
// image past MinAge whatever the usage; one never used goes first.
func TestImageGCDeleteUnused(t *testing.T) {
	n, g, clk := newGCScene(t, 900)
	clk.Step(time.Minute) // young is now past MinAge
	if err := g.DeleteUnused(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(n.removed, ","); got != "young,old-a,old-b" {
		t.Errorf("removed %s, want young,old-a,old-b", got)
	}
}

func TestNewGCValidates(t *testing.T) {
	n := &gcNode{}
	for name, cfg := range map[string]images.GCConfig{
		"GCConfig.Images":               {Containers: n},
		"GCConfig.Containers":           {Images: n},
		"GCConfig.HighThresholdPercent": {Images: n, Containers: n, HighThresholdPercent: 120},
		"GCConfig.LowThresholdPercent":  {Images: n, Containers: n, HighThresholdPercent: 50, LowThresholdPercent: 60},
	} {
		if _, err := images.NewGC(cfg); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("NewGC: %v, want an error naming %s", err, name)
		}
	}
}
