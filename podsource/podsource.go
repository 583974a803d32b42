package podsource

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// Op is the kind of a pod update.
type Op string

// The operations, the kubelet's (pkg/kubelet/types).
const (
	// SET: the complete set of pods of a source. Sources send it; the
	// Merger turns it into the operations below.
	SET Op = "SET"
	// ADD: pods new to the agent.
	ADD Op = "ADD"
	// UPDATE: pods whose spec, labels or annotations changed.
	UPDATE Op = "UPDATE"
	// DELETE: pods being deleted gracefully (deletionTimestamp set).
	DELETE Op = "DELETE"
	// REMOVE: pods gone from their source.
	REMOVE Op = "REMOVE"
	// RECONCILE: pods whose status alone changed.
	RECONCILE Op = "RECONCILE"
)

// The kubelet's pod annotations for pods from a file or URL.
const (
	AnnotationConfigHash   = "kubernetes.io/config.hash"
	AnnotationConfigSeen   = "kubernetes.io/config.seen"
	AnnotationConfigSource = "kubernetes.io/config.source"
	AnnotationConfigMirror = "kubernetes.io/config.mirror"
)

// Source names, the values of AnnotationConfigSource.
const (
	SourceFile = "file"
	SourceHTTP = "http"
	SourceAPI  = "api"
)

// Update is a change to the pods of one source.
type Update struct {
	Op   Op
	Pods []*v1.Pod
	// Source names the source. The Merger sets it to the name of the
	// source that sent the update.
	Source string
	// Origins optionally tells where each pod came from (a file, a URL
	// and item), by UID, for the messages about it. The Merger does not
	// set it on what it sends.
	Origins map[types.UID]string
}

// Source is anything that produces pod updates. Run sends updates to out
// until ctx ends and then returns; it never closes out. A snapshot
// source sends SET updates; an incremental one sends ADD, UPDATE,
// DELETE and REMOVE.
type Source interface {
	Name() string
	Run(ctx context.Context, out chan<- Update) error
}

// EventFunc receives events about bad input: the object is nil for a file
// or URL that holds no valid pod, and for a nil pod a source sent. It is
// an alias of runtime.EventFunc: it must not block.
type EventFunc = runtime.EventFunc
