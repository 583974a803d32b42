package fakecri

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// broadcaster fans container events out to subscribers. Each subscriber
// has an unbounded queue, so a slow reader never blocks the runtime and
// never misses an event. A queued event holds its sandbox's status but
// not its containers': those are filled in as it is delivered, so a
// backlog of a big pod's events costs little.
type broadcaster struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	mu     sync.Mutex
	queue  []queuedEvent
	notify chan struct{} // capacity 1: "the queue may be non-empty"
	done   chan struct{} // closed by closeAll
}

func newBroadcaster() *broadcaster {
	return &broadcaster{subs: map[*subscriber]struct{}{}}
}

func (b *broadcaster) subscribe() (*subscriber, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false
	}
	s := &subscriber{notify: make(chan struct{}, 1), done: make(chan struct{})}
	b.subs[s] = struct{}{}
	return s, true
}

func (b *broadcaster) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs, s)
}

// queuedEvent is an event without its containers' statuses, and the
// sandbox they are taken from when it is delivered (nil: none).
type queuedEvent struct {
	ev *runtimeapi.ContainerEventResponse
	sb *sandbox
}

func (b *broadcaster) publish(ev queuedEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.mu.Lock()
		s.queue = append(s.queue, ev)
		s.mu.Unlock()
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
}

func (b *broadcaster) active() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs) > 0
}

func (b *broadcaster) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		close(s.done)
		delete(b.subs, s)
	}
}

func (s *subscriber) take() []queuedEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// emit publishes an event about container (or sandbox) id of sandbox sb.
// The event carries the sandbox's status as of now and, once delivered,
// the statuses of all the sandbox's containers as of its delivery, as
// containerd's do (containerd too reads them when it handles the event).
// The caller holds r.mu.
func (r *Runtime) emit(id string, sb *sandbox, typ runtimeapi.ContainerEventType) {
	if !r.events.active() {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: typ,
		CreatedAt:          r.now().UnixNano(),
	}
	if sb != nil {
		ev.PodSandboxStatus = sb.status()
	}
	r.events.publish(queuedEvent{ev: ev, sb: sb})
}

// delivered returns the event to send for q: a new response with the
// containers' statuses of now. A container's status is built once per
// change of the container and shared by every event that carries it, so
// an event costs a pointer per container.
func (r *Runtime) delivered(q queuedEvent) *runtimeapi.ContainerEventResponse {
	out := &runtimeapi.ContainerEventResponse{
		ContainerId:        q.ev.ContainerId,
		ContainerEventType: q.ev.ContainerEventType,
		CreatedAt:          q.ev.CreatedAt,
		PodSandboxStatus:   q.ev.PodSandboxStatus,
	}
	if q.sb != nil {
		r.mu.Lock()
		out.ContainersStatuses = make([]*runtimeapi.ContainerStatus, len(q.sb.sorted))
		for i, c := range q.sb.sorted {
			out.ContainersStatuses[i] = c.eventStatus()
		}
		r.mu.Unlock()
	}
	return out
}

// GetContainerEvents implements RuntimeService: it sends every container
// and sandbox lifecycle event from now on to ch, in order, until ctx ends
// or Close is called. The statuses in the events are shared with other
// events and subscribers and must not be modified. It blocks;
// connectionEstablished, if not nil, is called with a nil stream once the
// subscription is in place. Sending to
// ch blocks when ch is full; events are queued meanwhile, never dropped.
// It returns ctx's error, or Unavailable after Close.
func (r *Runtime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connectionEstablished func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	r.mu.Lock()
	err := r.enter("GetContainerEvents")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	s, ok := r.events.subscribe()
	if !ok {
		return errorf(codes.Unavailable, "fakecri: runtime is closed")
	}
	defer r.events.unsubscribe(s)
	if connectionEstablished != nil {
		connectionEstablished(nil)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errorf(codes.Unavailable, "fakecri: runtime is closed")
		case <-s.notify:
		}
		for _, q := range s.take() {
			select {
			case ch <- r.delivered(q):
			case <-ctx.Done():
				return ctx.Err()
			case <-s.done:
				return errorf(codes.Unavailable, "fakecri: runtime is closed")
			}
		}
	}
}
