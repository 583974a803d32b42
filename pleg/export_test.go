package pleg

import "k8s.io/apimachinery/pkg/types"

// Queued returns the pods awaiting inspection, in order.
func (e *Evented) Queued() []types.UID { return e.queue.uids() }

// Waiting reports whether a reader of the pod waits in GetNewerThan.
func (c *Cache) Waiting(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters[uid]) > 0
}
