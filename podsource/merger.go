package podsource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodekit/nodekit/internal/podutil"
)

// MergerConfig configures a Merger.
type MergerConfig struct {
	// Sources to merge; their names must be unique. Required. Their order
	// decides which pod keeps a full name two sources claim (see Merger).
	Sources []Source
	// Buffer is the capacity of the Updates channel. Default 50. When it
	// is full the Merger waits: updates are never dropped.
	Buffer int
	Logger logr.Logger
	// Events receives a FailedValidation warning for every pod the Merger
	// refuses, naming the pod, its source (and file or URL) and the field.
	// Default: no events.
	Events EventFunc
}

// Merger merges the updates of several sources into one stream of
// incremental operations, as the kubelet's pod config does: a SET becomes
// the difference with the source's previous pods; changes to spec, labels
// or annotations are UPDATEs (a new deletionTimestamp a DELETE);
// status-only changes are RECONCILEs. Within one merge the operations go
// out as REMOVE, ADD, UPDATE, DELETE, RECONCILE, and for each operation
// source by source in the order of MergerConfig.Sources.
//
// Every pod of every source gets the API server's defaults and Validate
// (ephemeral containers, which come with updates of running pods, are
// checked as the API server checks them when they are added, not
// refused), and a UID that is safe in a file name; a pod that fails is
// left out with a FailedValidation event, as is a nil pod (the event is
// then about no pod). The Merger works on copies: it never modifies a pod
// a source sent.
//
// A full name (namespace/name) belongs to one pod. When several pods
// claim one, the winner is the pod of the source listed first in
// MergerConfig.Sources and, within a source, the one first in its SET
// (a File sends its files in name order, an HTTP source the list order);
// for an incremental source, the one it sent first. The others get a
// FailedValidation event naming them, their source and the winner, and
// stay out while the winner holds the name: when it goes, the next one is
// added. The outcome depends on what the sources hold, not on which
// arrived first: a winner that appears later displaces (REMOVE) the pod
// that held the name. A UID is likewise held by one pod.
type Merger struct {
	cfg     MergerConfig
	updates chan Update
	order   map[string]int

	// mu guards the fields below.
	mu sync.Mutex
	// cands holds each source's valid pods, given the name or not.
	cands map[string]map[types.UID]*candidate
	// pods holds each source's pods as sent out.
	pods map[string]map[types.UID]*v1.Pod
	seen map[string]bool
	// next numbers the pods of incremental updates, by source.
	next map[string]int
}

// candidate is a valid pod of a source.
type candidate struct {
	pod    *v1.Pod
	source string
	origin string
	// rank orders the claims on a full name: source, then position.
	rank [2]int
	// refused reports a candidate that lost its name or UID at the last
	// merge, so that it gets one event, not one per merge.
	refused bool
}

func (c *candidate) describe() string {
	s := fmt.Sprintf("pod %s/%s (UID %q) from source %s", c.pod.Namespace, c.pod.Name, c.pod.UID, c.source)
	if c.origin != "" {
		s += ", " + c.origin
	}
	return s
}

// NewMerger returns a Merger. It starts nothing; call Run.
func NewMerger(cfg MergerConfig) (*Merger, error) {
	if len(cfg.Sources) == 0 {
		return nil, errors.New("podsource: MergerConfig.Sources is empty")
	}
	order := map[string]int{}
	for i, s := range cfg.Sources {
		if _, dup := order[s.Name()]; dup {
			return nil, fmt.Errorf("podsource: two sources are named %q", s.Name())
		}
		order[s.Name()] = i
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 50
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	if cfg.Events == nil {
		cfg.Events = func(*v1.Pod, string, string, string) {}
	}
	return &Merger{cfg: cfg, updates: make(chan Update, cfg.Buffer), order: order,
		cands: map[string]map[types.UID]*candidate{}, pods: map[string]map[types.UID]*v1.Pod{},
		seen: map[string]bool{}, next: map[string]int{}}, nil
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

// Pods returns every pod the Merger has sent out and not removed.
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

// Run runs every source and merges their updates until ctx ends. Each
// update is tagged with the name of the source that sent it.
func (m *Merger) Run(ctx context.Context) error {
	in := make(chan Update)
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range m.cfg.Sources {
		own := make(chan Update)
		g.Go(func() error {
			if err := s.Run(gctx, own); err != nil {
				return fmt.Errorf("podsource: source %s: %w", s.Name(), err)
			}
			return nil
		})
		g.Go(func() error {
			for {
				select {
				case <-gctx.Done():
					return nil
				case u := <-own:
					u.Source = s.Name()
					select {
					case in <- u:
					case <-gctx.Done():
						return nil
					}
				}
			}
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

// admit returns the defaulted copy of a pod a source sent, or nil with a
// FailedValidation event when it is not valid.
func (m *Merger) admit(p *v1.Pod, source, origin string) *v1.Pod {
	pod := p.DeepCopy()
	applyDefaults(pod)
	errs := validatePod(pod)
	errs = append(errs, validateUID(pod.UID, field.NewPath("metadata", "uid"))...)
	if len(errs) == 0 {
		return pod
	}
	c := candidate{pod: pod, source: source, origin: origin}
	err := joinErrors(errs)
	m.cfg.Logger.Error(err, "refusing an invalid pod", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "source", source)
	m.cfg.Events(p, v1.EventTypeWarning, "FailedValidation", fmt.Sprintf("%s: %v", c.describe(), err))
	return nil
}

// validateUID accepts what is safe as a file name: the UID names the
// pod's directories.
func validateUID(uid types.UID, path *field.Path) field.ErrorList {
	s := string(uid)
	switch p := podutil.UIDProblem(uid); {
	case p == "":
		return nil
	case s == "":
		return field.ErrorList{field.Required(path, "")}
	case len(s) > 128:
		return field.ErrorList{field.TooLong(path, "", 128)}
	default:
		return field.ErrorList{field.Invalid(path, s, p)}
	}
}

// merge applies one source update and returns the operations it means.
func (m *Merger) merge(u Update) []Update {
	m.mu.Lock()
	defer m.mu.Unlock()
	src := u.Source
	m.seen[src] = true
	u.Pods = m.dropNil(u)
	cands := m.cands[src]
	if cands == nil {
		cands = map[types.UID]*candidate{}
	}
	deleting := map[types.UID]bool{}
	switch u.Op {
	case SET:
		old := cands
		cands = map[types.UID]*candidate{}
		for i, p := range u.Pods {
			pod := m.admit(p, src, u.Origins[p.UID])
			if pod == nil {
				continue
			}
			if _, dup := cands[pod.UID]; dup {
				m.refuseUID(pod, src, u.Origins[p.UID])
				continue
			}
			c := &candidate{pod: pod, source: src, origin: u.Origins[p.UID], rank: [2]int{m.order[src], i}}
			if prev, ok := old[pod.UID]; ok {
				c.refused = prev.refused
			}
			cands[pod.UID] = c
		}
	case ADD, UPDATE, RECONCILE, DELETE:
		for _, p := range u.Pods {
			pod := m.admit(p, src, u.Origins[p.UID])
			if pod == nil {
				continue
			}
			c := &candidate{pod: pod, source: src, origin: u.Origins[p.UID]}
			if prev, ok := cands[pod.UID]; ok {
				c.rank, c.refused = prev.rank, prev.refused
			} else {
				c.rank = [2]int{m.order[src], m.next[src]}
				m.next[src]++
			}
			cands[pod.UID] = c
			if u.Op == DELETE {
				deleting[pod.UID] = true
			}
		}
	case REMOVE:
		for _, p := range u.Pods {
			delete(cands, p.UID)
		}
	default:
		m.cfg.Logger.Error(fmt.Errorf("unknown op %q", u.Op), "ignoring a pod update", "source", src)
	}
	m.cands[src] = cands
	return m.diff(m.elect(), deleting)
}

// dropNil returns the update's pods without the nil ones, each reported
// with a log line and an event about no pod. The source's slice is left
// as it is.
func (m *Merger) dropNil(u Update) []*v1.Pod {
	if !slices.Contains(u.Pods, nil) {
		return u.Pods
	}
	pods := make([]*v1.Pod, 0, len(u.Pods))
	for _, p := range u.Pods {
		if p != nil {
			pods = append(pods, p)
			continue
		}
		m.cfg.Logger.Error(errors.New("a nil pod"), "ignoring a nil pod", "source", u.Source, "op", u.Op)
		m.cfg.Events(nil, v1.EventTypeWarning, "FailedValidation", fmt.Sprintf("a nil pod from source %s (op %s): ignored", u.Source, u.Op))
	}
	return pods
}

func (m *Merger) refuseUID(pod *v1.Pod, source, origin string) {
	c := candidate{pod: pod, source: source, origin: origin}
	err := field.Duplicate(field.NewPath("metadata", "uid"), pod.UID)
	m.cfg.Logger.Error(err, "refusing a pod", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "source", source)
	m.cfg.Events(pod, v1.EventTypeWarning, "FailedValidation", fmt.Sprintf("%s: %v: another pod of the same update has it", c.describe(), err))
}

// elect gives each full name and each UID to the first candidate by rank
// and returns the winners by source. A loser gets an event the first time
// it loses.
func (m *Merger) elect() map[string]map[types.UID]*v1.Pod {
	var all []*candidate
	for _, cands := range m.cands {
		for _, c := range cands {
			all = append(all, c)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i].rank, all[j].rank
		return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
	})
	byName := map[string]*candidate{}
	byUID := map[types.UID]*candidate{}
	won := map[string]map[types.UID]*v1.Pod{}
	for _, c := range all {
		name := c.pod.Namespace + "/" + c.pod.Name
		holder, taken := byName[name]
		what := fmt.Sprintf("metadata.name: Duplicate value: %q", name)
		if !taken {
			holder, taken = byUID[c.pod.UID]
			what = fmt.Sprintf("metadata.uid: Duplicate value: %q", c.pod.UID)
		}
		if taken {
			if !c.refused {
				c.refused = true
				msg := fmt.Sprintf("%s: %s: the %s has it; ignoring this one while it does", c.describe(), what, holder.describe())
				m.cfg.Logger.Info("refusing a pod whose name or UID another pod holds", "pod", name, "podUID", c.pod.UID, "source", c.source, "holder", holder.describe())
				m.cfg.Events(c.pod, v1.EventTypeWarning, "FailedValidation", msg)
			}
			continue
		}
		c.refused = false
		byName[name], byUID[c.pod.UID] = c, c
		if won[c.source] == nil {
			won[c.source] = map[types.UID]*v1.Pod{}
		}
		won[c.source][c.pod.UID] = c.pod
	}
	return won
}

// diff compares the winners with the pods sent out, records the winners as
// sent, and returns the operations, source by source in configured order.
func (m *Merger) diff(won map[string]map[types.UID]*v1.Pod, deleting map[types.UID]bool) []Update {
	var removes, adds, updates, deletes, reconciles []Update
	for _, s := range m.cfg.Sources {
		src := s.Name()
		old, cur := m.pods[src], won[src]
		var rm, add, upd, del, rec []*v1.Pod
		for uid, p := range old {
			if _, ok := cur[uid]; !ok {
				rm = append(rm, p)
			}
		}
		for uid, p := range cur {
			prev, ok := old[uid]
			switch {
			case !ok:
				add = append(add, p)
			case deleting[uid] && prev.DeletionTimestamp == nil || specChanged(prev, p) && p.DeletionTimestamp != nil && prev.DeletionTimestamp == nil:
				del = append(del, p)
			case specChanged(prev, p):
				upd = append(upd, p)
			case !equality.Semantic.DeepEqual(prev.Status, p.Status):
				rec = append(rec, p)
			default:
				cur[uid] = prev // unchanged: keep the pod as sent
			}
		}
		if cur == nil {
			delete(m.pods, src)
		} else {
			m.pods[src] = cur
		}
		for _, x := range []struct {
			list *[]Update
			op   Op
			pods []*v1.Pod
		}{{&removes, REMOVE, rm}, {&adds, ADD, add}, {&updates, UPDATE, upd}, {&deletes, DELETE, del}, {&reconciles, RECONCILE, rec}} {
			if len(x.pods) > 0 {
				sortPods(x.pods)
				*x.list = append(*x.list, Update{Op: x.op, Pods: x.pods, Source: src})
			}
		}
	}
	var out []Update
	for _, l := range [][]Update{removes, adds, updates, deletes, reconciles} {
		out = append(out, l...)
	}
	return out
}

func sortPods(pods []*v1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
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
