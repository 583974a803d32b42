package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podsource"
)

// DefaultMirrorResyncPeriod is how often MirrorPods compares the static
// pods with their mirror pods without being told of a change, which is
// also how soon a failed create or delete is tried again.
const DefaultMirrorResyncPeriod = 10 * time.Second

// MirrorPodsConfig configures a MirrorPods.
type MirrorPodsConfig struct {
	// Client talks to the API server; the node's identity suffices (the
	// NodeRestriction admission plugin lets a node create and delete the
	// mirror pods of its own static pods). Required.
	Client kubernetes.Interface
	// NodeName is the node the static pods run on. Required.
	NodeName string
	// ResyncPeriod is how often the mirror pods are compared with the
	// static pods without a change, and how soon a failure is retried.
	// Default 10s.
	ResyncPeriod time.Duration
	// RequestTimeout bounds each call to the API server. Default 10s.
	RequestTimeout time.Duration
	// Clock drives the resync. Default: the real clock.
	Clock clock.WithTicker
	// Logger receives the logs. Default: discarded.
	Logger logr.Logger
}

// MirrorPods keeps a mirror pod in the API server for each static pod of
// the node, as the kubelet does, so that the cluster sees the pods the
// node runs from manifest files or a URL:
//
//   - a static pod without a mirror pod gets one: a copy of its metadata
//     and spec with the annotation kubernetes.io/config.mirror set to the
//     static pod's kubernetes.io/config.hash, and a controller owner
//     reference to the Node (which NodeRestriction requires, and which
//     lets the garbage collector remove it with the Node);
//   - a mirror pod whose config.mirror annotation is not the static pod's
//     hash (the manifest changed) or which is being deleted is deleted
//     and created again;
//   - a mirror pod deleted by someone is created again;
//   - a mirror pod whose static pod is gone is deleted.
//
// Deletions use grace period 0 and a precondition on the mirror pod's
// UID, as the kubelet's do. NodeRestriction refuses a mirror pod whose
// spec refers to other API objects (a secret, a configMap, a service
// account...): such a static pod runs but has no mirror pod, and the
// refusal is logged at every resync, as the kubelet does.
//
// MirrorPods learns of the static pods through Source, which wraps the
// static pod source (a podsource.File or HTTP), and of the mirror pods
// through the PodSource that has it in PodSourceConfig.MirrorPods; until
// that PodSource has listed the node's pods once, it does nothing.
// StatusSinkConfig.MirrorPods makes the StatusSink write a static pod's
// status to its mirror pod.
//
// # Differences from the kubelet
//
// The kubelet creates a mirror pod when it syncs the static pod (after
// admission) and deletes an orphaned one once the static pod's
// containers have stopped. MirrorPods works from the sources instead,
// so that the agent needs no hook for it: every static pod a source
// gives is mirrored, including one the agent refused to admit, and a
// mirror pod goes as soon as its static pod leaves its source.
type MirrorPods struct {
	cfg MirrorPodsConfig

	wake chan struct{} // capacity 1: a change to compare

	// mu guards the fields below.
	mu sync.Mutex
	// static holds the static pods by source name, then namespace/name.
	static map[string]map[string]*v1.Pod
	// mirrors holds the node's mirror pods by namespace/name, as the
	// PodSource last listed them; nil until it has.
	mirrors map[string]*v1.Pod
	// nodeUID is the Node's UID, the owner of the mirror pods; empty
	// until read, and after a refusal that may mean a new Node.
	nodeUID types.UID

	created, deleted int64
}

// NewMirrorPods checks cfg. It does no I/O and starts nothing.
func NewMirrorPods(cfg MirrorPodsConfig) (*MirrorPods, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: MirrorPodsConfig.Client is required")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("kube: MirrorPodsConfig.NodeName is required")
	}
	if errs := validation.IsDNS1123Subdomain(cfg.NodeName); len(errs) > 0 {
		return nil, fmt.Errorf("kube: MirrorPodsConfig.NodeName %q: %v", cfg.NodeName, errs)
	}
	if err := defaultDuration("MirrorPodsConfig", "ResyncPeriod", &cfg.ResyncPeriod, DefaultMirrorResyncPeriod); err != nil {
		return nil, err
	}
	if err := defaultDuration("MirrorPodsConfig", "RequestTimeout", &cfg.RequestTimeout, DefaultRequestTimeout); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &MirrorPods{
		cfg:    cfg,
		wake:   make(chan struct{}, 1),
		static: map[string]map[string]*v1.Pod{},
	}, nil
}

// Created and Deleted return how many mirror pods were created and
// deleted. Safe for concurrent use.
func (m *MirrorPods) Created() int64 { m.mu.Lock(); defer m.mu.Unlock(); return m.created }

// Deleted: see Created.
func (m *MirrorPods) Deleted() int64 { m.mu.Lock(); defer m.mu.Unlock(); return m.deleted }

// Source wraps a static pod source: the returned source has src's name
// and sends what src sends, unchanged, and MirrorPods keeps mirror pods
// for the static pods in it (pods annotated kubernetes.io/config.source
// api are ignored). A SET replaces the source's static pods; ADD, UPDATE
// and RECONCILE add or replace pods; DELETE and REMOVE remove them. Its
// Run returns when src's Run does.
func (m *MirrorPods) Source(src podsource.Source) podsource.Source {
	return &mirroredSource{m: m, src: src}
}

type mirroredSource struct {
	m   *MirrorPods
	src podsource.Source
}

func (s *mirroredSource) Name() string { return s.src.Name() }

func (s *mirroredSource) Run(ctx context.Context, out chan<- podsource.Update) error {
	in := make(chan podsource.Update)
	done := make(chan error, 1)
	go func() { done <- s.src.Run(ctx, in) }()
	for {
		select {
		case u := <-in:
			s.m.observeStatic(s.src.Name(), u)
			select {
			case out <- u:
			case <-ctx.Done():
				return <-done
			}
		case err := <-done:
			return err
		case <-ctx.Done():
			return <-done
		}
	}
}

func podKey(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// staticHash is the hash a mirror pod of p carries.
func staticHash(p *v1.Pod) string {
	if h := p.Annotations[podsource.AnnotationConfigHash]; h != "" {
		return h
	}
	return string(p.UID)
}

// isStatic tells whether p came from a manifest file or URL.
func isStatic(p *v1.Pod) bool {
	src, ok := p.Annotations[podsource.AnnotationConfigSource]
	return ok && src != podsource.SourceAPI
}

// isMirror tells whether p is a mirror pod.
func isMirror(p *v1.Pod) bool {
	_, ok := p.Annotations[podsource.AnnotationConfigMirror]
	return ok
}

func (m *MirrorPods) observeStatic(source string, u podsource.Update) {
	m.mu.Lock()
	set := m.static[source]
	if u.Op == podsource.SET || set == nil {
		set = map[string]*v1.Pod{}
		m.static[source] = set
	}
	for _, p := range u.Pods {
		if p == nil || !isStatic(p) {
			continue
		}
		switch u.Op {
		case podsource.DELETE, podsource.REMOVE:
			delete(set, podKey(p))
		default:
			set[podKey(p)] = &v1.Pod{ObjectMeta: *p.ObjectMeta.DeepCopy(), Spec: *p.Spec.DeepCopy()}
		}
	}
	m.mu.Unlock()
	m.poke()
}

// observeMirrors records the node's mirror pods as the PodSource listed
// them.
func (m *MirrorPods) observeMirrors(pods []*v1.Pod) {
	mirrors := make(map[string]*v1.Pod, len(pods))
	for _, p := range pods {
		mirrors[podKey(p)] = p
	}
	m.mu.Lock()
	m.mirrors = mirrors
	m.mu.Unlock()
	m.poke()
}

func (m *MirrorPods) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run compares the static pods with the mirror pods after every change
// either source reports and every ResyncPeriod, creating and deleting
// mirror pods, until ctx ends. It returns nil when ctx ends. Failures are
// logged and retried at the next resync. Run must be called once.
func (m *MirrorPods) Run(ctx context.Context) error {
	t := m.cfg.Clock.NewTicker(m.cfg.ResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.wake:
		case <-t.C():
		}
		m.sync(ctx)
	}
}

// sync makes one pass over the static and mirror pods.
func (m *MirrorPods) sync(ctx context.Context) {
	m.mu.Lock()
	if m.mirrors == nil {
		m.mu.Unlock()
		return
	}
	want := map[string]*v1.Pod{}
	for _, set := range m.static {
		for k, p := range set {
			want[k] = p
		}
	}
	have := make(map[string]*v1.Pod, len(m.mirrors))
	for k, p := range m.mirrors {
		have[k] = p
	}
	m.mu.Unlock()

	keys := make([]string, 0, len(want)+len(have))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		static, mirror := want[k], have[k]
		if mirror != nil && (static == nil || mirror.DeletionTimestamp != nil || mirror.Annotations[podsource.AnnotationConfigMirror] != staticHash(static)) {
			if err := m.deleteMirror(ctx, mirror); err != nil {
				m.cfg.Logger.Error(err, "cannot delete a mirror pod", "pod", k)
				continue
			}
			mirror = nil
		}
		if static != nil && mirror == nil {
			if err := m.createMirror(ctx, static); err != nil {
				m.cfg.Logger.Error(err, "cannot create a mirror pod", "pod", k)
			}
		}
	}
}

func (m *MirrorPods) deleteMirror(ctx context.Context, mirror *v1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	defer cancel()
	zero := int64(0)
	uid := mirror.UID
	err := m.cfg.Client.CoreV1().Pods(mirror.Namespace).Delete(ctx, mirror.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("kube: delete mirror pod %s: %w", podKey(mirror), err)
	}
	if err == nil {
		m.mu.Lock()
		m.deleted++
		m.mu.Unlock()
		m.cfg.Logger.V(2).Info("mirror pod deleted", "pod", podKey(mirror), "podUID", mirror.UID)
	}
	return nil
}

func (m *MirrorPods) createMirror(ctx context.Context, static *v1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	defer cancel()
	uid, err := m.ownerUID(ctx)
	if err != nil {
		return err
	}
	hash := staticHash(static)
	mirror := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        static.Name,
			Namespace:   static.Namespace,
			Labels:      copyMap(static.Labels),
			Annotations: copyMap(static.Annotations),
		},
		Spec: *static.Spec.DeepCopy(),
	}
	mirror.Annotations[podsource.AnnotationConfigMirror] = hash
	controller := true
	mirror.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: m.cfg.NodeName, UID: uid, Controller: &controller,
	}}
	pods := m.cfg.Client.CoreV1().Pods(static.Namespace)
	_, err = pods.Create(ctx, mirror, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Created at the last pass, and not yet seen by the PodSource?
		cur, gerr := pods.Get(ctx, static.Name, metav1.GetOptions{})
		if gerr == nil && cur.Annotations[podsource.AnnotationConfigMirror] == hash && cur.DeletionTimestamp == nil {
			return nil
		}
	}
	if apierrors.IsForbidden(err) {
		// The Node may have been registered again with a new UID.
		m.mu.Lock()
		m.nodeUID = ""
		m.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("kube: create mirror pod %s: %w", podKey(static), err)
	}
	m.mu.Lock()
	m.created++
	m.mu.Unlock()
	m.cfg.Logger.V(2).Info("mirror pod created", "pod", podKey(static), "hash", hash)
	return nil
}

// ownerUID returns the Node's UID, read once and again after a refusal.
func (m *MirrorPods) ownerUID(ctx context.Context) (types.UID, error) {
	m.mu.Lock()
	uid := m.nodeUID
	m.mu.Unlock()
	if uid != "" {
		return uid, nil
	}
	node, err := m.cfg.Client.CoreV1().Nodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("kube: mirror pods: get node %s: %w", m.cfg.NodeName, err)
	}
	if node.UID == "" {
		return "", fmt.Errorf("kube: mirror pods: node %s has no UID", m.cfg.NodeName)
	}
	m.mu.Lock()
	m.nodeUID = node.UID
	m.mu.Unlock()
	return node.UID, nil
}
