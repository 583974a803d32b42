package pleg

import "k8s.io/apimachinery/pkg/types"

// Queued returns the pods awaiting inspection, in order.
func (e *Evented) Queued() []types.UID { return e.queue.uids() }
