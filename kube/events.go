package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// EventComponent is the events' default source component, the kubelet's.
const EventComponent = "kubelet"

// EventRecorderConfig configures an EventRecorder.
type EventRecorderConfig struct {
	// Client talks to the API server; the node's identity suffices (the
	// Node authorizer lets a node create and patch events). Required.
	Client kubernetes.Interface
	// NodeName is the node: the events' source host, and the involved
	// object of events about no pod. Required.
	NodeName string
	// Component is the events' source component (reportingController).
	// Default "kubelet", so that tools that filter on it find them.
	Component string
	// Burst and QPS bound the events about one object (of one source):
	// Burst may be sent at once, then one every 1/QPS seconds; the rest
	// are dropped. Default 25 and 1/300 (one every 5 minutes), client-go's
	// and so the kubelet's.
	Burst int
	QPS   float32
	// Clock drives the rate limit and the aggregation of similar events.
	// Default: the real clock.
	Clock clock.PassiveClock
	// Logger receives the recorder's logs. Default: discarded.
	Logger logr.Logger
}

// EventRecorder writes events to the API server with client-go's event
// broadcaster, as the kubelet's recorder does: identical events within
// ten minutes become one event whose count grows (a patch), more than
// ten similar events about an object (differing only in the message)
// within ten minutes are aggregated into one "(combined from similar
// events)", and each object gets at most Burst events at once and QPS
// after. Sending runs on a goroutine of Run; Event never blocks, and an
// event that does not fit the broadcaster's queue (1000 events) is
// dropped, as are events after Run's ctx ended. Events recorded before
// Run (up to 1000) are kept and sent when it starts, so that parts
// started at the same time lose none.
//
// Its Event method has the signature of agent.Config.Events: an event
// about a pod refers to the pod (namespace, name, UID; a static pod's
// refers to the static pod, as the kubelet's do), and an event with pod
// nil (about a manifest) refers to the Node, as do the Node's events.
type EventRecorder struct {
	cfg    EventRecorderConfig
	scheme *runtime.Scheme

	// mu guards the fields below.
	mu sync.Mutex
	// rec is set while Run runs.
	rec record.EventRecorder
	// early holds the events recorded before Run; stopped is set when
	// Run has ended.
	early   []earlyEvent
	stopped bool
}

// maxEarlyEvents bounds the events kept before Run, the size of the
// broadcaster's queue.
const maxEarlyEvents = 1000

type earlyEvent struct {
	ref                  *v1.ObjectReference
	typ, reason, message string
}

// NewEventRecorder checks cfg. It does no I/O and starts nothing.
func NewEventRecorder(cfg EventRecorderConfig) (*EventRecorder, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: EventRecorderConfig.Client is required")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("kube: EventRecorderConfig.NodeName is required")
	}
	if errs := validation.IsDNS1123Subdomain(cfg.NodeName); len(errs) > 0 {
		return nil, fmt.Errorf("kube: EventRecorderConfig.NodeName %q: %v", cfg.NodeName, errs)
	}
	if cfg.Component == "" {
		cfg.Component = EventComponent
	}
	if cfg.Burst < 0 {
		return nil, fmt.Errorf("kube: EventRecorderConfig.Burst %d is negative", cfg.Burst)
	}
	if cfg.QPS < 0 {
		return nil, fmt.Errorf("kube: EventRecorderConfig.QPS %v is negative", cfg.QPS)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	// The recorder only needs the scheme for objects that are not
	// references already, which Event never passes; a private empty one
	// keeps client-go's global scheme out of it.
	return &EventRecorder{cfg: cfg, scheme: runtime.NewScheme()}, nil
}

// Run sends the recorded events to the API server, those recorded before
// it first, until ctx ends, then stops the broadcaster and returns nil.
// Events recorded after ctx ended are dropped. Run must be called once.
func (r *EventRecorder) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		BurstSize: r.cfg.Burst,
		QPS:       r.cfg.QPS,
		Clock:     r.cfg.Clock,
	}))
	w := b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.cfg.Client.CoreV1().Events("")})
	rec := b.NewRecorder(r.scheme, v1.EventSource{Component: r.cfg.Component, Host: r.cfg.NodeName})
	r.mu.Lock()
	r.rec = rec
	early := r.early
	r.early = nil
	r.mu.Unlock()
	for _, e := range early {
		rec.Event(e.ref, e.typ, e.reason, e.message)
	}
	<-ctx.Done()
	r.mu.Lock()
	r.rec = nil
	r.stopped = true
	r.mu.Unlock()
	w.Stop()
	b.Shutdown()
	return nil
}

// Event records an event about pod, or about the Node when pod is nil.
// typ is v1.EventTypeNormal or v1.EventTypeWarning. It never blocks and
// is safe for concurrent use; see EventRecorder for what is dropped.
func (r *EventRecorder) Event(pod *v1.Pod, typ, reason, message string) {
	var ref *v1.ObjectReference
	if pod == nil {
		ref = r.nodeRef()
	} else {
		ref = &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	}
	r.mu.Lock()
	rec := r.rec
	if rec == nil && !r.stopped && len(r.early) < maxEarlyEvents {
		r.early = append(r.early, earlyEvent{ref, typ, reason, message})
	}
	r.mu.Unlock()
	if rec != nil {
		rec.Event(ref, typ, reason, message)
	}
}

// nodeRef is the reference of the Node in events, the kubelet's: its UID
// is the node's name, so that events survive the Node's re-creation.
func (r *EventRecorder) nodeRef() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: r.cfg.NodeName, UID: types.UID(r.cfg.NodeName)}
}
