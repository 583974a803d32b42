package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime/cri"
)

// ErrServicesNotSynced is returned by Services.ListServices before the
// first list of services has been read.
var ErrServicesNotSynced = errors.New("services have not yet been read at least once")

// ServicesConfig configures a Services.
type ServicesConfig struct {
	// Client talks to the API server. The node's identity may list and
	// watch services in every namespace (the Node authorizer's static
	// node rules). Required.
	Client kubernetes.Interface
	// Clock drives the watch's back-offs. Default: the real clock.
	Clock clock.Clock
	// Logger receives the watch's logs. Default: discarded.
	Logger logr.Logger
}

// Services keeps a cache of every service of the cluster, as the
// kubelet's service lister does, for the service environment variables of
// containers: it implements runtime/cri.ServiceLister
// (cri.Config.Services). The cache is filled by a list and watch of
// services in all namespaces that runs under Run.
type Services struct {
	cfg   ServicesConfig
	store *servicesStore
	ran   sync.Once
}

var _ cri.ServiceLister = (*Services)(nil)

// servicesStore is an indexer that tells when the reflector first filled
// it.
type servicesStore struct {
	cache.Indexer
	once   sync.Once
	synced chan struct{}
}

func (s *servicesStore) Replace(list []interface{}, rv string) error {
	err := s.Indexer.Replace(list, rv)
	s.once.Do(func() { close(s.synced) })
	return err
}

// NewServices checks cfg. It does no I/O and starts nothing.
func NewServices(cfg ServicesConfig) (*Services, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: ServicesConfig.Client is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &Services{cfg: cfg, store: &servicesStore{
		Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		synced:  make(chan struct{}),
	}}, nil
}

// Run lists and watches services until ctx ends, re-listing after
// failures with the reflector's back-off, then returns nil. Only the
// first call runs; later calls return an error at once.
func (s *Services) Run(ctx context.Context) error {
	first := false
	s.ran.Do(func() { first = true })
	if !first {
		return errors.New("kube: Services.Run called twice")
	}
	c := s.cfg.Client.CoreV1().Services(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (k8sruntime.Object, error) {
			return c.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, opts)
		},
	}
	log := s.cfg.Logger
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, s.cfg.Client), &v1.Service{}, s.store, cache.ReflectorOptions{
		Name:   "services",
		Clock:  s.cfg.Clock,
		Logger: &log,
	})
	r.RunWithContext(ctx)
	return nil
}

// Synced returns a channel that is closed once the first list of services
// has been read (under Run); it never closes if Run does not run or the
// list never succeeds. Safe for concurrent use.
func (s *Services) Synced() <-chan struct{} { return s.store.synced }

// HasSynced reports whether the first list of services has been read.
func (s *Services) HasSynced() bool {
	select {
	case <-s.store.synced:
		return true
	default:
		return false
	}
}

// ListServices returns the cached services of namespace, which the caller
// must not modify. Before the first list has been read it returns an
// error wrapping ErrServicesNotSynced, as the kubelet refuses to build the
// environment of an API pod then. It never blocks and is safe for
// concurrent use.
func (s *Services) ListServices(_ context.Context, namespace string) ([]*v1.Service, error) {
	if !s.HasSynced() {
		return nil, fmt.Errorf("kube: %w", ErrServicesNotSynced)
	}
	objs, err := s.store.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, fmt.Errorf("kube: listing services of namespace %q: %w", namespace, err)
	}
	out := make([]*v1.Service, 0, len(objs))
	for _, o := range objs {
		if svc, ok := o.(*v1.Service); ok {
			out = append(out, svc)
		}
	}
	return out, nil
}
