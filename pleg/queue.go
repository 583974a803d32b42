package pleg

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// podRef names a pod for Runtime.GetPodStatus.
type podRef struct{ name, namespace string }

// podQueue is the set of pods awaiting inspection, in the order each
// first arrived. A pod is queued once however many events name it before
// it is taken; taking it makes room for the next event to queue it
// again. It keeps the pod's name and namespace, never an event, so its
// size is bounded by the number of pods. It is safe for concurrent use:
// the stream reader adds, the inspector takes.
type podQueue struct {
	// ready has capacity 1: "the queue may be non-empty".
	ready chan struct{}

	// mu guards order and pending.
	mu      sync.Mutex
	order   []types.UID
	pending map[types.UID]podRef
}

func newPodQueue() *podQueue {
	return &podQueue{ready: make(chan struct{}, 1), pending: map[types.UID]podRef{}}
}

// add queues the pod unless it is already queued. It never blocks.
func (q *podQueue) add(uid types.UID, ref podRef) {
	q.mu.Lock()
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

// take removes and returns the pod queued first.
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
