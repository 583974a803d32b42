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
type Cache struct {
	// mu guards everything below.
	mu   sync.Mutex
	pods map[types.UID]*cacheEntry
	// timestamp: every pod's entry is at least this fresh (a relist saw
	// all pods then).
	timestamp time.Time
	waiters   map[types.UID][]*waiter
}

type cacheEntry struct {
	status   *runtime.PodStatus
	err      error
	modified time.Time
}

type waiter struct {
	after time.Time
	ch    chan struct{} // closed when satisfied
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{pods: map[types.UID]*cacheEntry{}, waiters: map[types.UID][]*waiter{}}
}

// Get returns the pod's latest status and the error of the observation.
// A pod the cache does not know gets an empty status, not an error.
// Callers must not mutate the status.
func (c *Cache) Get(uid types.UID) (*runtime.PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(uid)
}

func (c *Cache) getLocked(uid types.UID) (*runtime.PodStatus, error) {
	if e := c.pods[uid]; e != nil {
		return e.status, e.err
	}
	return &runtime.PodStatus{ID: uid}, nil
}

// freshLocked reports whether the cache has an observation of the pod
// newer than t.
func (c *Cache) freshLocked(uid types.UID, t time.Time) bool {
	if c.timestamp.After(t) {
		return true
	}
	e := c.pods[uid]
	return e != nil && e.modified.After(t)
}

// GetNewerThan blocks until the cache holds an observation of the pod
// that began after t (its own, or a relist that saw every pod), then
// returns it. It returns ctx's error if ctx ends first.
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*runtime.PodStatus, error) {
	c.mu.Lock()
	if c.freshLocked(uid, t) {
		defer c.mu.Unlock()
		return c.getLocked(uid)
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
// that began at t.
func (c *Cache) Set(uid types.UID, status *runtime.PodStatus, err error, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.pods[uid]; e != nil && e.modified.After(t) {
		return // never replace a newer observation with an older one
	}
	c.pods[uid] = &cacheEntry{status: status, err: err, modified: t}
	c.wakeLocked(uid)
}

// Delete forgets a pod; readers get an empty status.
func (c *Cache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

// UpdateTime records that every pod's entry is current as of t.
func (c *Cache) UpdateTime(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.timestamp) {
		c.timestamp = t
	}
	for uid := range c.waiters {
		c.wakeLocked(uid)
	}
}

func (c *Cache) wakeLocked(uid types.UID) {
	list := c.waiters[uid]
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

// Statuses returns every cached pod's latest status, by UID. The map is
// new; the statuses must not be mutated.
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
