package pleg

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// podRef names a pod for Runtime.GetPodStatus.
type podRef struct{ name, namespace string }

// podQueue is the set of pods awaiting inspection, in the order each
// first arrived. A pod is queued once however many events name it before
// it is taken; taking it makes room for the next event to queue it
// again. It keeps the pod's name and namespace, never an event, so its
// size is bounded by the number of pods.
//
// It also keeps, per pod, when the first event not yet covered by an
// inspection arrived, and mirrors it in the cache as the pod's pending
// mark, so that the cache's global timestamp never vouches for a pod
// past an event still queued, held back or under inspection. An
// inspection covers the events that arrived before it began (begin) and
// hands the cache the mark of those that arrived during it (finish),
// both under the queue's lock, so that no event's mark is lost between
// the reader and the inspector.
//
// It is safe for concurrent use: the stream reader adds, the inspector
// takes.
type podQueue struct {
	cache *Cache
	// ready has capacity 1: "the queue may be non-empty".
	ready chan struct{}

	// mu guards the fields below, and orders the pending marks this
	// queue writes into the cache.
	mu      sync.Mutex
	order   []types.UID
	pending map[types.UID]podRef
	// since: when the first event of the pod not covered by an
	// inspection arrived.
	since map[types.UID]time.Time
}

func newPodQueue(cache *Cache) *podQueue {
	return &podQueue{cache: cache, ready: make(chan struct{}, 1), pending: map[types.UID]podRef{}, since: map[types.UID]time.Time{}}
}

// add queues the pod unless it is already queued. An event (arrived at
// at) also marks the pod pending in the cache; a retry does not. It
// never blocks on the inspector.
func (q *podQueue) add(uid types.UID, ref podRef, at time.Time, event bool) {
	q.mu.Lock()
	if event {
		if _, ok := q.since[uid]; !ok {
			q.since[uid] = at
			q.cache.markPending(uid, at)
		}
	}
	if _, ok := q.pending[uid]; !ok {
		q.pending[uid] = ref
		q.order = append(q.order, uid)
	}
	q.mu.Unlock()
	q.signal()
}

func (q *podQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take removes and returns the pod queued first. The pod's events stay
// pending until begin.
func (q *podQueue) take() (types.UID, podRef, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return "", podRef{}, false
	}
	uid := q.order[0]
	q.order[0] = ""
	q.order = q.order[1:]
	if len(q.order) == 0 {
		q.order = nil // release the array
	}
	ref := q.pending[uid]
	delete(q.pending, uid)
	return uid, ref, true
}

// begin records that an inspection of the pod starts: it covers every
// event of the pod that arrived so far. The cache keeps the pod's mark
// until finish.
func (q *podQueue) begin(uid types.UID) {
	q.mu.Lock()
	delete(q.since, uid)
	q.mu.Unlock()
}

// finish records the inspection's outcome in the cache through record,
// which it calls with the pod's new pending mark: the arrival of the
// first event since begin, or zero.
func (q *podQueue) finish(uid types.UID, record func(pending time.Time)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	record(q.since[uid])
}

// drain empties the queue and forgets every pending mark, here and in
// the cache, and returns the pods that were queued.
func (q *podQueue) drain() []types.UID {
	q.mu.Lock()
	defer q.mu.Unlock()
	uids := q.order
	q.order = nil
	clear(q.pending)
	clear(q.since)
	q.cache.clearPending()
	return uids
}

// len returns how many pods are queued.
func (q *podQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// uids returns the queued pods in order.
func (q *podQueue) uids() []types.UID {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]types.UID(nil), q.order...)
}
