package images

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// GCImages is what the image garbage collector asks of the image
// service; the CRI ImageManagerService implements it.
type GCImages interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
}

// GCContainers lists the containers, whose images are in use; the CRI
// RuntimeService implements it.
type GCContainers interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// GCConfig configures an image garbage collector, with the kubelet's
// defaults for zero fields.
type GCConfig struct {
	// Images lists and removes images. Required.
	Images GCImages
	// Containers lists the containers (running or not) whose images are
	// kept. Required.
	Containers GCContainers
	// FsUsage gives the image filesystem's capacity and available bytes
	// (the stats Summary's node.runtime.imageFs). Required for
	// GarbageCollect; DeleteUnused does without.
	FsUsage func(ctx context.Context) (capacity, available uint64, err error)
	// HighThresholdPercent is the image filesystem usage from which a
	// collection runs. Default 85; 100 disables it.
	HighThresholdPercent int
	// LowThresholdPercent is the usage a collection frees down to.
	// Default 80.
	LowThresholdPercent int
	// MinAge is how long an unused image is kept after it was first
	// seen. Default 2m.
	MinAge time.Duration
	// Period is how often Run collects. Default 5m, the kubelet's.
	Period time.Duration
	Clock  clock.WithTicker
	Logger logr.Logger
}

// GC removes unused images, least recently used first, the way the
// kubelet's image garbage collector does: an image used by any container
// the runtime has (running or exited) or pinned by the runtime is never
// removed, nor one first seen less than MinAge ago. Times of first sight
// and last use are the collector's own, from its clock, since the runtime
// keeps none. Safe for concurrent use.
type GC struct {
	cfg GCConfig

	// mu guards records and serializes collections.
	mu      sync.Mutex
	records map[string]*imageRecord // by image ID
}

type imageRecord struct {
	firstDetected, lastUsed time.Time
	size                    uint64
	pinned                  bool
}

// NewGC validates cfg and returns a collector. It starts nothing.
func NewGC(cfg GCConfig) (*GC, error) {
	switch {
	case cfg.Images == nil:
		return nil, errors.New("images: GCConfig.Images is required")
	case cfg.Containers == nil:
		return nil, errors.New("images: GCConfig.Containers is required")
	}
	if cfg.HighThresholdPercent == 0 {
		cfg.HighThresholdPercent = 85
	}
	if cfg.LowThresholdPercent == 0 {
		cfg.LowThresholdPercent = 80
	}
	if cfg.HighThresholdPercent < 0 || cfg.HighThresholdPercent > 100 {
		return nil, fmt.Errorf("images: GCConfig.HighThresholdPercent %d is not in [0, 100]", cfg.HighThresholdPercent)
	}
	if cfg.LowThresholdPercent < 0 || cfg.LowThresholdPercent > cfg.HighThresholdPercent {
		return nil, fmt.Errorf("images: GCConfig.LowThresholdPercent %d is not in [0, HighThresholdPercent %d]", cfg.LowThresholdPercent, cfg.HighThresholdPercent)
	}
	if cfg.MinAge == 0 {
		cfg.MinAge = 2 * time.Minute
	}
	if cfg.Period <= 0 {
		cfg.Period = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &GC{cfg: cfg, records: map[string]*imageRecord{}}, nil
}

// Run collects every Period until ctx ends, then returns nil. A failed
// collection is logged.
func (g *GC) Run(ctx context.Context) error {
	t := g.cfg.Clock.NewTicker(g.cfg.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if err := g.GarbageCollect(ctx); err != nil && ctx.Err() == nil {
				g.cfg.Logger.Error(err, "image garbage collection failed")
			}
		}
	}
}

// GarbageCollect frees images when the image filesystem's usage is at
// HighThresholdPercent or more, down to LowThresholdPercent. It returns
// an error when FsUsage is missing or fails, when a removal fails, or
// when the unused images do not free enough.
func (g *GC) GarbageCollect(ctx context.Context) error {
	if g.cfg.FsUsage == nil {
		return errors.New("images: GCConfig.FsUsage is required to collect by thresholds")
	}
	capacity, available, err := g.cfg.FsUsage(ctx)
	if err != nil {
		return fmt.Errorf("images: image filesystem usage: %w", err)
	}
	if capacity == 0 || available > capacity {
		return fmt.Errorf("images: image filesystem reports capacity %d and available %d", capacity, available)
	}
	usage := 100 - int(available*100/capacity)
	if usage < g.cfg.HighThresholdPercent || g.cfg.HighThresholdPercent == 100 {
		return g.detect(ctx) // keep the records current
	}
	want := int64(capacity)*int64(100-g.cfg.LowThresholdPercent)/100 - int64(available)
	freed, err := g.free(ctx, want)
	if err != nil {
		return err
	}
	if freed < want {
		return fmt.Errorf("images: image filesystem at %d%% (high threshold %d%%): attempted to free %d bytes, but only found %d bytes eligible to free", usage, g.cfg.HighThresholdPercent, want, freed)
	}
	return nil
}

// DeleteUnused removes every unused image older than MinAge, as the
// kubelet does under disk pressure before evicting pods. It fits
// eviction.ReclaimFunc.
func (g *GC) DeleteUnused(ctx context.Context) error {
	_, err := g.free(ctx, math.MaxInt64)
	return err
}

// detect refreshes the records from the runtime.
func (g *GC) detect(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, err := g.detectLocked(ctx)
	return err
}

func (g *GC) detectLocked(ctx context.Context) (inUse map[string]bool, err error) {
	now := g.cfg.Clock.Now()
	images, err := g.cfg.Images.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("images: list images: %w", err)
	}
	containers, err := g.cfg.Containers.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("images: list containers: %w", err)
	}
	inUse = map[string]bool{}
	for _, c := range containers {
		if c.ImageRef != "" {
			inUse[c.ImageRef] = true
		}
		if c.GetImage().GetImage() != "" {
			inUse[c.GetImage().GetImage()] = true
		}
	}
	seen := map[string]bool{}
	for _, img := range images {
		seen[img.Id] = true
		r, ok := g.records[img.Id]
		if !ok {
			r = &imageRecord{firstDetected: now}
			g.records[img.Id] = r
		}
		used := inUse[img.Id]
		for _, tag := range img.RepoTags {
			used = used || inUse[tag]
		}
		for _, d := range img.RepoDigests {
			used = used || inUse[d]
		}
		if used {
			inUse[img.Id] = true
			r.lastUsed = now
		}
		r.size, r.pinned = img.Size, img.Pinned
	}
	for id := range g.records {
		if !seen[id] {
			delete(g.records, id)
		}
	}
	return inUse, nil
}

// free removes unused images, least recently used first (then first
// detected first), until want bytes are freed; it returns what it freed.
func (g *GC) free(ctx context.Context, want int64) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	inUse, err := g.detectLocked(ctx)
	if err != nil {
		return 0, err
	}
	now := g.cfg.Clock.Now()
	type candidate struct {
		id string
		r  *imageRecord
	}
	var cands []candidate
	for id, r := range g.records {
		if inUse[id] || r.pinned || now.Sub(r.firstDetected) < g.cfg.MinAge {
			continue
		}
		cands = append(cands, candidate{id, r})
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i].r, cands[j].r
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		if !a.firstDetected.Equal(b.firstDetected) {
			return a.firstDetected.Before(b.firstDetected)
		}
		return cands[i].id < cands[j].id
	})
	var freed int64
	var errs []error
	for _, c := range cands {
		if freed >= want {
			break
		}
		if err := g.cfg.Images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: c.id}); err != nil {
			errs = append(errs, fmt.Errorf("images: remove image %s: %w", c.id, err))
			continue
		}
		g.cfg.Logger.V(2).Info("removed unused image", "image", c.id, "size", c.r.size)
		delete(g.records, c.id)
		freed += int64(c.r.size)
	}
	return freed, errors.Join(errs...)
}
