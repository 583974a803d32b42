package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podsource"
)

// PodSourceConfig configures a PodSource.
type PodSourceConfig struct {
	// Client talks to the API server; the node's identity suffices.
	// Required.
	Client kubernetes.Interface
	// NodeName is the node whose pods are watched. Required.
	NodeName string
	// MirrorPods, when set, is told of the node's mirror pods after every
	// change, so that it keeps them in step with the static pods.
	// Default: none.
	MirrorPods *MirrorPods
	// Clock drives the watch's back-off. Default: the real clock.
	Clock clock.WithTicker
	// Logger receives the watch's logs. Default: discarded.
	Logger logr.Logger
}

// PodSource is a podsource.Source of the pods bound to a node in the API
// server, as the kubelet's API-server source: a list and watch of the
// pods with spec.nodeName=NAME in every namespace (the field selector the
// Node authorizer requires of a node), re-listed when the watch breaks.
//
// It is a snapshot source: after the first list and after every change it
// sends a SET with all the node's pods, sorted by creation time then
// namespace/name, named podsource.SourceAPI. The podsource.Merger turns the
// SETs into ADD, UPDATE, DELETE (a pod given a deletionTimestamp: the
// graceful deletion the API server began), REMOVE and RECONCILE. Every pod
// sent is a copy carrying the annotation kubernetes.io/config.source=api.
//
// Mirror pods (annotated kubernetes.io/config.mirror) are never sent: they
// stand for static pods that the node runs from their own source, as the
// kubelet ignores them in its API-server source. They go to
// PodSourceConfig.MirrorPods instead, when set.
type PodSource struct {
	cfg PodSourceConfig
}

var _ podsource.Source = (*PodSource)(nil)

// NewPodSource checks cfg. It does no I/O and starts nothing.
func NewPodSource(cfg PodSourceConfig) (*PodSource, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: PodSourceConfig.Client is required")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("kube: PodSourceConfig.NodeName is required")
	}
	if errs := validation.IsDNS1123Subdomain(cfg.NodeName); len(errs) > 0 {
		return nil, fmt.Errorf("kube: PodSourceConfig.NodeName %q: %v", cfg.NodeName, errs)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &PodSource{cfg: cfg}, nil
}

// Name implements podsource.Source: podsource.SourceAPI.
func (s *PodSource) Name() string { return podsource.SourceAPI }

// Run implements podsource.Source. It lists and watches until ctx ends,
// retrying with the reflector's back-off when the API server fails, and
// blocks on out when the receiver is slow (a SET is never dropped; the
// next one carries every change since). It returns nil when ctx ends.
func (s *PodSource) Run(ctx context.Context, out chan<- podsource.Update) error {
	selector := fields.OneTermEqualSelector("spec.nodeName", s.cfg.NodeName).String()
	pods := s.cfg.Client.CoreV1().Pods(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return pods.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return pods.Watch(ctx, opts)
		},
	}
	push := func(objs []interface{}) {
		pods, mirrors := s.snapshot(objs)
		if s.cfg.MirrorPods != nil {
			s.cfg.MirrorPods.observeMirrors(mirrors)
		}
		u := podsource.Update{Op: podsource.SET, Source: podsource.SourceAPI, Pods: pods}
		select {
		case out <- u:
		case <-ctx.Done():
		}
	}
	log := s.cfg.Logger
	// The wrapper lets the reflector see whether the client can stream the
	// initial list (WatchList); one that cannot, such as client-go's fake
	// clientset, is listed and then watched.
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, s.cfg.Client), &v1.Pod{}, cache.NewUndeltaStore(push, cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{
		Name:   "pods of node " + s.cfg.NodeName,
		Clock:  s.cfg.Clock,
		Logger: &log,
	})
	r.RunWithContext(ctx)
	return nil
}

// snapshot copies the node's pods out of the store, annotated and sorted,
// and returns its mirror pods apart (not copied: only read). A pod bound
// elsewhere (which the field selector already excludes) is left out.
func (s *PodSource) snapshot(objs []interface{}) (pods, mirrors []*v1.Pod) {
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		p, ok := o.(*v1.Pod)
		if !ok || p.Spec.NodeName != s.cfg.NodeName {
			continue
		}
		if isMirror(p) {
			mirrors = append(mirrors, p)
			continue
		}
		p = p.DeepCopy()
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[podsource.AnnotationConfigSource] = podsource.SourceAPI
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, mirrors
}
