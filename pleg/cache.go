package pleg

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// Cache holds the latest runtime.PodStatus of every pod, stamped with the
// time the observation began. Pod workers read it with GetNewerThan, which
// blocks until an observation newer than their last sync exists, so a
// worker never acts on a state older than its own last action. It is
// safe for concurrent use.
//
// Besides each pod's own observation the cache keeps a global timestamp:
// the generator's word that every pod's entry was current then. The
// evented generator may also mark a pod whose event awaits inspection:
// the global timestamp then vouches for that pod only up to the event,
// and its readers wait for the pod's own inspection.
type Cache struct {
	// mu guards everything below.
	mu   sync.Mutex
	pods map[types.UID]*cacheEntry
	// timestamp: every pod's entry is current as of this time, except
	// past its pending mark.
	timestamp time.Time
	waiters   map[types.UID][]*waiter
	// empty: entries that hold no status (a removal, or only a pending
	// mark), dropped once the global timestamp vouches for them.
	empty map[types.UID]struct{}
	// waitHook, when set, is called (with mu held) each time a reader
	// starts waiting, before it is recorded.
	waitHook func()
}

type cacheEntry struct {
	// status is nil when nothing of the pod was seen: a removal, or an
	// entry that holds only a pending mark or an error.
	status   *runtime.PodStatus
	err      error
	modified time.Time
	// pending, when set, is when an event of the pod not yet covered by
	// an inspection arrived: the global timestamp vouches for the pod
	// only before it.
	pending time.Time
}

type waiter struct {
	after time.Time
	ch    chan struct{} // closed when satisfied
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{pods: map[types.UID]*cacheEntry{}, waiters: map[types.UID][]*waiter{}, empty: map[types.UID]struct{}{}}
}

// Get returns the pod's latest status and the error of the observation.
// A pod the cache does not know, or knows to be gone, gets an empty
// status, not an error. Callers must not mutate the status.
func (c *Cache) Get(uid types.UID) (*runtime.PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(uid)
}

func (c *Cache) getLocked(uid types.UID) (*runtime.PodStatus, error) {
	e := c.pods[uid]
	if e == nil {
		return &runtime.PodStatus{ID: uid}, nil
	}
	if e.status == nil {
		return &runtime.PodStatus{ID: uid}, e.err
	}
	return e.status, e.err
}

// freshLocked reports whether the cache has an observation of the pod
// newer than t: its own, or the global timestamp up to the pod's pending
// mark.
func (c *Cache) freshLocked(uid types.UID, t time.Time) bool {
	e := c.pods[uid]
	if e == nil {
		return c.timestamp.After(t)
	}
	if e.modified.After(t) {
		return true
	}
	global := c.timestamp
	if !e.pending.IsZero() && e.pending.Before(global) {
		global = e.pending
	}
	return global.After(t)
}

// GetNewerThan blocks until the cache holds an observation of the pod
// that began after t (its own, or the generator's word that every pod
// was current after t), then returns it; a pod found gone gets an empty
// status. It returns ctx's error if ctx ends first.
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*runtime.PodStatus, error) {
	c.mu.Lock()
	if c.freshLocked(uid, t) {
		defer c.mu.Unlock()
		return c.getLocked(uid)
	}
	if c.waitHook != nil {
		c.waitHook()
	}
	w := &waiter{after: t, ch: make(chan struct{})}
	c.waiters[uid] = append(c.waiters[uid], w)
	c.mu.Unlock()
	select {
	case <-w.ch:
		return c.Get(uid)
	case <-ctx.Done():
		c.mu.Lock()
		list := c.waiters[uid]
		for i, x := range list {
			if x == w {
				c.waiters[uid] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(c.waiters[uid]) == 0 {
			delete(c.waiters, uid)
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Set records an observation of the pod (or the error that prevented it)
// that began at t. An observation older than the pod's current one is
// ignored. A failed observation (err set) with a nil status keeps the
// last status beside the error, so that what was last seen of the pod is
// not lost.
func (c *Cache) Set(uid types.UID, status *runtime.PodStatus, err error, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(uid, status, err, t, false)
}

// Delete records that an observation begun at t found nothing left of
// the pod: readers get an empty status, and those waiting for an
// observation older than t are woken. It is ignored if the cache holds a
// newer observation.
func (c *Cache) Delete(uid types.UID, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(uid, nil, nil, t, true)
}

func (c *Cache) setLocked(uid types.UID, status *runtime.PodStatus, err error, t time.Time, gone bool) {
	e := c.pods[uid]
	if e == nil {
		e = &cacheEntry{}
		c.pods[uid] = e
	} else if e.modified.After(t) {
		return // never replace a newer observation with an older one
	}
	switch {
	case gone:
		e.status, e.err = nil, nil
	case err != nil && status == nil:
		e.err = err // keep the last status
	default:
		e.status, e.err = status, err
	}
	e.modified = t
	c.noteEmptyLocked(uid, e)
	c.wakeLocked(uid)
}

// noteEmptyLocked keeps track of the entries that hold no status, to be
// dropped once the global timestamp vouches for them.
func (c *Cache) noteEmptyLocked(uid types.UID, e *cacheEntry) {
	if e.status == nil && e.err == nil {
		c.empty[uid] = struct{}{}
	} else {
		delete(c.empty, uid)
	}
}

// markPending records that an event of the pod arrived at t and awaits
// inspection, unless an earlier one still does.
func (c *Cache) markPending(uid types.UID, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.pods[uid]
	if e == nil {
		e = &cacheEntry{}
		c.pods[uid] = e
		c.noteEmptyLocked(uid, e)
	}
	if e.pending.IsZero() {
		e.pending = t
	}
}

// observe records an inspection of the pod begun at t, as Set does (as
// Delete does when gone), and replaces the pod's pending mark with
// pending: zero when no event arrived since the inspection began.
func (c *Cache) observe(uid types.UID, status *runtime.PodStatus, err error, t time.Time, gone bool, pending time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.pods[uid]; e != nil {
		e.pending = pending
	} else if !pending.IsZero() {
		c.pods[uid] = &cacheEntry{pending: pending}
	}
	c.setLocked(uid, status, err, t, gone)
}

// clearPending drops every pending mark: the pods they name are to be
// inspected by the next relist, whose timestamp covers them.
func (c *Cache) clearPending() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.pods {
		e.pending = time.Time{}
	}
}

// hookWaits makes the cache call f each time a reader starts waiting,
// before the reader is recorded; nil stops it. f is called with the
// cache's lock held: it must not block nor call the cache.
func (c *Cache) hookWaits(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waitHook = f
}

// waiting reports whether a reader is waiting.
func (c *Cache) waiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters) > 0
}

// UpdateTime records that every pod's entry is current as of t, except
// past the pending mark of a pod that has one.
func (c *Cache) UpdateTime(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.timestamp) {
		c.timestamp = t
	}
	for uid := range c.empty {
		if e := c.pods[uid]; e == nil || (e.pending.IsZero() && !e.modified.After(c.timestamp)) {
			delete(c.pods, uid) // the global timestamp says as much
			delete(c.empty, uid)
		}
	}
	for uid := range c.waiters {
		c.wakeLocked(uid)
	}
}

func (c *Cache) wakeLocked(uid types.UID) {
	list := c.waiters[uid]
	if len(list) == 0 {
		return
	}
	kept := list[:0]
	for _, w := range list {
		if c.freshLocked(uid, w.after) {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		delete(c.waiters, uid)
	} else {
		c.waiters[uid] = kept
	}
}

// Statuses returns every cached pod's latest status, by UID; pods found
// gone are left out. The map is new; the statuses must not be mutated.
func (c *Cache) Statuses() map[types.UID]*runtime.PodStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[types.UID]*runtime.PodStatus, len(c.pods))
	for uid, e := range c.pods {
		if e.status != nil {
			out[uid] = e.status
		}
	}
	return out
}
