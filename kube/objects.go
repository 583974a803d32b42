package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	nkruntime "github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/volumes"
)

// DefaultObjectTTL is how long Objects keeps watching a configMap or
// secret that nobody asked for.
const DefaultObjectTTL = 5 * time.Minute

// ObjectsConfig configures an Objects.
type ObjectsConfig struct {
	// Client talks to the API server. With the node's identity, the Node
	// authorizer lets it read only the configMaps and secrets that pods
	// bound to the node refer to. Required.
	Client kubernetes.Interface
	// TTL is how long an object is watched after it was last asked for;
	// then its watch stops, and the next Get reads it again and starts a
	// new one. Default 5m.
	TTL time.Duration
	// RequestTimeout bounds each read from the API server. Default 10s.
	RequestTimeout time.Duration
	// Clock drives the TTL. Default: the real clock.
	Clock clock.WithTicker
	// Logger receives the watches' logs. Default: discarded.
	Logger logr.Logger
}

// Objects gives the configMaps and secrets that pods use in env, envFrom,
// image pull secrets and volumes, from the API server, as the kubelet's
// watch-based configMap and secret managers do: the first Get of an object
// reads it and starts a watch of that one object (a list and watch with
// the field selector metadata.name=NAME in its namespace, which the Node
// authorizer allows for an object a pod of the node refers to), and later
// Gets answer from what the watch saw, so they cost no request and see
// changes as soon as the API server sends them.
//
// The kubelet stops a watch when the last pod that refers to the object
// is unregistered. Objects has no list of pods: it stops a watch when the
// object was not asked for during TTL (5m by default), which a running
// pod's volumes, read again at each sync, never let happen. The next Get
// after that reads the object again.
//
// Watches run under Run. Before Run and after it ended every Get reads
// the object from the API server. It implements runtime/cri.ObjectGetter
// (cri.Config.Objects) and volumes.ObjectGetter with one value. A missing
// object is an error wrapping runtime.ErrNotFound; a refusal (an object
// no pod of the node refers to) is the API server's Forbidden, wrapped.
type Objects struct {
	cfg ObjectsConfig

	// mu guards the fields below.
	mu sync.Mutex
	// ctx is Run's; nil when Run does not run.
	ctx     context.Context
	wg      sync.WaitGroup
	entries map[objectKey]*objectEntry
}

var (
	_ cri.ObjectGetter     = (*Objects)(nil)
	_ volumes.ObjectGetter = (*Objects)(nil)
)

type objectKey struct{ resource, namespace, name string }

// objectEntry is the watch of one object.
type objectEntry struct {
	store    *syncedStore
	cancel   context.CancelFunc
	lastUsed time.Time
}

// syncedStore is a store that tells when the reflector first filled it.
type syncedStore struct {
	cache.Store
	once   sync.Once
	synced chan struct{}
}

func (s *syncedStore) Replace(list []interface{}, rv string) error {
	err := s.Store.Replace(list, rv)
	s.once.Do(func() { close(s.synced) })
	return err
}

func (s *syncedStore) isSynced() bool {
	select {
	case <-s.synced:
		return true
	default:
		return false
	}
}

// NewObjects checks cfg. It does no I/O and starts nothing.
func NewObjects(cfg ObjectsConfig) (*Objects, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: ObjectsConfig.Client is required")
	}
	if err := defaultDuration("ObjectsConfig", "TTL", &cfg.TTL, DefaultObjectTTL); err != nil {
		return nil, err
	}
	if err := defaultDuration("ObjectsConfig", "RequestTimeout", &cfg.RequestTimeout, DefaultRequestTimeout); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &Objects{cfg: cfg, entries: map[objectKey]*objectEntry{}}, nil
}

// Watched returns how many objects are watched now. Safe for concurrent
// use.
func (o *Objects) Watched() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.entries)
}

// Run runs the watches and stops those unused for TTL, checking every
// TTL/4, until ctx ends; then it stops them all and returns nil once
// their goroutines have ended. Run must be called once.
func (o *Objects) Run(ctx context.Context) error {
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
	t := o.cfg.Clock.NewTicker(max(o.cfg.TTL/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			o.mu.Lock()
			o.ctx = nil
			for k, e := range o.entries {
				e.cancel()
				delete(o.entries, k)
			}
			o.mu.Unlock()
			o.wg.Wait()
			return nil
		case <-t.C():
			o.expire()
		}
	}
}

// expire stops the watches unused for TTL.
func (o *Objects) expire() {
	now := o.cfg.Clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, e := range o.entries {
		if now.Sub(e.lastUsed) >= o.cfg.TTL {
			e.cancel()
			delete(o.entries, k)
			o.cfg.Logger.V(4).Info("stopped watching an object", "resource", k.resource, "namespace", k.namespace, "name", k.name)
		}
	}
}

// GetConfigMap implements cri.ObjectGetter and volumes.ObjectGetter. It
// blocks for at most one read from the API server, none once the watch
// of the object has synced; it is safe for concurrent use, and the caller
// must not modify the result.
func (o *Objects) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, err := o.get(ctx, objectKey{"configmaps", namespace, name})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ConfigMap), nil
}

// GetSecret implements cri.ObjectGetter and volumes.ObjectGetter, as
// GetConfigMap.
func (o *Objects) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	obj, err := o.get(ctx, objectKey{"secrets", namespace, name})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Secret), nil
}

func (o *Objects) get(ctx context.Context, k objectKey) (k8sruntime.Object, error) {
	o.mu.Lock()
	e := o.entries[k]
	if e == nil && o.ctx != nil && o.ctx.Err() == nil {
		e = o.watch(k)
	}
	if e != nil {
		e.lastUsed = o.cfg.Clock.Now()
		if e.store.isSynced() {
			o.mu.Unlock()
			obj, ok, err := e.store.GetByKey(k.namespace + "/" + k.name)
			if err != nil {
				return nil, fmt.Errorf("kube: %s %s/%s: %w", kind(k), k.namespace, k.name, err)
			}
			if !ok {
				return nil, fmt.Errorf("kube: %s %s/%s: %w", kind(k), k.namespace, k.name, nkruntime.ErrNotFound)
			}
			return obj.(k8sruntime.Object), nil
		}
	}
	o.mu.Unlock()
	return o.read(ctx, k)
}

func kind(k objectKey) string {
	if k.resource == "secrets" {
		return "secret"
	}
	return "configMap"
}

// read gets the object from the API server.
func (o *Objects) read(ctx context.Context, k objectKey) (k8sruntime.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.RequestTimeout)
	defer cancel()
	var obj k8sruntime.Object
	var err error
	if k.resource == "secrets" {
		obj, err = o.cfg.Client.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	} else {
		obj, err = o.cfg.Client.CoreV1().ConfigMaps(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("kube: %s %s/%s: %w", kind(k), k.namespace, k.name, nkruntime.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("kube: get %s %s/%s: %w", kind(k), k.namespace, k.name, err)
	}
	return obj, nil
}

// watch starts the watch of one object under Run's ctx. o.mu is held.
func (o *Objects) watch(k objectKey) *objectEntry {
	ctx, cancel := context.WithCancel(o.ctx)
	selector := fields.OneTermEqualSelector("metadata.name", k.name).String()
	var lw *cache.ListWatch
	var example k8sruntime.Object
	if k.resource == "secrets" {
		c := o.cfg.Client.CoreV1().Secrets(k.namespace)
		example = &v1.Secret{}
		lw = &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (k8sruntime.Object, error) {
				opts.FieldSelector = selector
				return c.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.FieldSelector = selector
				return c.Watch(ctx, opts)
			},
		}
	} else {
		c := o.cfg.Client.CoreV1().ConfigMaps(k.namespace)
		example = &v1.ConfigMap{}
		lw = &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (k8sruntime.Object, error) {
				opts.FieldSelector = selector
				return c.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.FieldSelector = selector
				return c.Watch(ctx, opts)
			},
		}
	}
	store := &syncedStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), synced: make(chan struct{})}
	log := o.cfg.Logger
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, o.cfg.Client), example, store, cache.ReflectorOptions{
		Name:   kind(k) + " " + k.namespace + "/" + k.name,
		Clock:  o.cfg.Clock,
		Logger: &log,
	})
	e := &objectEntry{store: store, cancel: cancel}
	o.entries[k] = e
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		r.RunWithContext(ctx)
	}()
	return e
}
