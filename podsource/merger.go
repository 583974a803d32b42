package podsource

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// MergerConfig configures a Merger.
type MergerConfig struct {
	// Sources to merge; their names must be unique. Required.
	Sources []Source
	// Buffer is the capacity of the Updates channel. Default 50. When it
	// is full the Merger waits: updates are never dropped.
	Buffer int
	Logger logr.Logger
}

// Merger merges the updates of several sources into one stream of
// incremental operations (REMOVE, ADD, UPDATE, DELETE, RECONCILE, in that
// order within one source update), as the kubelet's pod config does:
// a SET becomes the difference with the source's previous pods; changes
// to spec, labels or annotations are UPDATEs (a new deletionTimestamp a
// DELETE); status-only changes are RECONCILEs.
type Merger struct {
	cfg     MergerConfig
	updates chan Update

	// mu guards pods and seen.
	mu   sync.Mutex
	pods map[string]map[types.UID]*v1.Pod
	seen map[string]bool
}

// NewMerger returns a Merger. It starts nothing; call Run.
func NewMerger(cfg MergerConfig) (*Merger, error) {
	if len(cfg.Sources) == 0 {
		return nil, errors.New("podsource: MergerConfig.Sources is empty")
	}
	names := map[string]bool{}
	for _, s := range cfg.Sources {
		if names[s.Name()] {
			return nil, fmt.Errorf("podsource: two sources are named %q", s.Name())
		}
		names[s.Name()] = true
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 50
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &Merger{cfg: cfg, updates: make(chan Update, cfg.Buffer), pods: map[string]map[types.UID]*v1.Pod{}, seen: map[string]bool{}}, nil
}

// Updates returns the merged stream. It is never closed.
func (m *Merger) Updates() <-chan Update { return m.updates }

// SeenAllSources reports whether every source has sent at least once, so
// that a pod missing from all of them is really gone (and orphans may be
// killed).
func (m *Merger) SeenAllSources() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen) == len(m.cfg.Sources)
}

// Pods returns every pod of every source.
func (m *Merger) Pods() []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*v1.Pod
	for _, pods := range m.pods {
		for _, p := range pods {
			out = append(out, p)
		}
	}
	return out
}

// Run runs every source and merges their updates until ctx ends.
func (m *Merger) Run(ctx context.Context) error {
	in := make(chan Update)
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range m.cfg.Sources {
		g.Go(func() error {
			if err := s.Run(gctx, in); err != nil {
				return fmt.Errorf("podsource: source %s: %w", s.Name(), err)
			}
			return nil
		})
	}
	g.Go(func() error {
		for {
			select {
			case <-gctx.Done():
				return nil
			case u := <-in:
				for _, out := range m.merge(u) {
					select {
					case m.updates <- out:
					case <-gctx.Done():
						return nil
					}
				}
			}
		}
	})
	return g.Wait()
}

// merge applies one source update and returns the operations it means.
func (m *Merger) merge(u Update) []Update {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[u.Source] = true
	old := m.pods[u.Source]
	if old == nil {
		old = map[types.UID]*v1.Pod{}
		m.pods[u.Source] = old
	}
	var removes, adds, updates, deletes, reconciles []*v1.Pod
	classify := func(p *v1.Pod) {
		prev, ok := old[p.UID]
		old[p.UID] = p
		switch {
		case !ok:
			adds = append(adds, p)
		case specChanged(prev, p):
			if p.DeletionTimestamp != nil && prev.DeletionTimestamp == nil {
				deletes = append(deletes, p)
			} else {
				updates = append(updates, p)
			}
		case !equality.Semantic.DeepEqual(prev.Status, p.Status):
			reconciles = append(reconciles, p)
		}
	}
	switch u.Op {
	case SET:
		keep := make(map[types.UID]bool, len(u.Pods))
		for _, p := range u.Pods {
			keep[p.UID] = true
		}
		for uid, p := range old {
			if !keep[uid] {
				removes = append(removes, p)
				delete(old, uid)
			}
		}
		for _, p := range u.Pods {
			classify(p)
		}
	case ADD, UPDATE, RECONCILE:
		for _, p := range u.Pods {
			classify(p)
		}
	case DELETE:
		for _, p := range u.Pods {
			old[p.UID] = p
			deletes = append(deletes, p)
		}
	case REMOVE:
		for _, p := range u.Pods {
			if prev, ok := old[p.UID]; ok {
				removes = append(removes, prev)
				delete(old, p.UID)
			}
		}
	default:
		m.cfg.Logger.Error(fmt.Errorf("unknown op %q", u.Op), "ignoring a pod update", "source", u.Source)
	}
	var out []Update
	for _, x := range []struct {
		op   Op
		pods []*v1.Pod
	}{{REMOVE, removes}, {ADD, adds}, {UPDATE, updates}, {DELETE, deletes}, {RECONCILE, reconciles}} {
		if len(x.pods) > 0 {
			out = append(out, Update{Op: x.op, Pods: x.pods, Source: u.Source})
		}
	}
	return out
}

// specChanged compares what the agent acts on: spec, labels, annotations
// (but the config.seen stamp) and the deletion fields.
func specChanged(a, b *v1.Pod) bool {
	if !equality.Semantic.DeepEqual(a.Spec, b.Spec) || !equality.Semantic.DeepEqual(a.Labels, b.Labels) {
		return true
	}
	if !equality.Semantic.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) || !equality.Semantic.DeepEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds) {
		return true
	}
	if len(a.Annotations) != len(b.Annotations) {
		return true
	}
	for k, v := range a.Annotations {
		if k != AnnotationConfigSeen && b.Annotations[k] != v {
			return true
		}
	}
	return false
}
