package cri

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/internal/cgroupfs"
	"github.com/nodekit/nodekit/internal/httpget"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri/images"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// Runtime implements runtime.Runtime on top of the CRI service interfaces.
// It keeps no pod state of its own: everything it knows it reads back from
// the runtime through the labels and annotations it writes, so a new
// Runtime (or an agent restart) adopts what an earlier one created.
//
// All methods are safe for concurrent use for different pods.
type Runtime struct {
	rs  criapi.RuntimeService
	cfg Config
	log logr.Logger

	crashBackoff *backoff.Tracker
	images       ImageManager
	hashes       *hashCache
	// panics counts the panics guard recovered.
	panics prometheus.Counter
	// hookTransport serves every HTTP lifecycle hook.
	hookTransport *http.Transport
	// sandboxKeys and containerKeys are the labels and annotations
	// listPods reads: the pod UID, name and namespace labels, in that
	// order, and the container hash annotation.
	sandboxKeys, containerKeys criclient.ListKeys
	// uidKeys is what the garbage collector reads: the pod UID label.
	uidKeys criclient.ListKeys
	// listMu guards listBuf, the memory listPods's brief lists reuse from
	// one relist to the next; a list that finds it taken allocates.
	listMu  sync.Mutex
	listBuf criclient.BriefBuffer
	// visitMu guards visitList, the memory VisitPods lists the pods into
	// from one call to the next; it is held while fn runs.
	visitMu   sync.Mutex
	visitList podList

	// cgroups manages pod cgroups when Config.CgroupRoot is set.
	cgroups *cgroupfs.Manager
	// actMu guards act, the settings nodekit gave each pod's running
	// containers and cgroup.
	actMu sync.Mutex
	act   map[types.UID]*actuated
	// qosMu guards qos, the burstable tier's CPU shares.
	qosMu sync.Mutex
	qos   qosTiers

	// mu guards typ.
	mu  sync.Mutex
	typ string
}

var (
	_ runtime.Runtime         = (*Runtime)(nil)
	_ runtime.PodCgroupReader = (*Runtime)(nil)
	_ runtime.ResizeChecker   = (*Runtime)(nil)
	_ runtime.PodVisitor      = (*Runtime)(nil)
	_ ImageManager            = (*images.Manager)(nil)
)

// New returns a Runtime over the services in cfg. It starts no
// goroutine, and does no I/O but, with Config.CgroupRoot, a look at the
// cgroup mount.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	im := cfg.Images
	if im == nil {
		m, err := images.New(images.Config{
			Service:          cfg.ImageService,
			Secrets:          cfg.Objects,
			BackOff:          images.BackOff(cfg.ImagePullBackOff),
			MaxParallelPulls: cfg.MaxParallelImagePulls,
			PullTimeout:      cfg.ImagePullTimeout,
			Clock:            cfg.Clock,
			Events:           cfg.Events,
		})
		if err != nil {
			return nil, fmt.Errorf("cri: image manager: %w", err)
		}
		im = m
	}
	panics := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodekit_runtime_panics_total",
		Help: "Panics recovered from a pod's steps in the runtime (a lifecycle hook, a container's kill); each fails its step.",
	})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(panics); err != nil {
			return nil, fmt.Errorf("cri: register metrics: %w", err)
		}
	}
	var cg *cgroupfs.Manager
	if cfg.CgroupRoot != "" {
		m, err := cgroupfs.New(cfg.CgroupMount)
		if err != nil {
			return nil, fmt.Errorf("cri: Config.CgroupRoot %s: %w", cfg.CgroupRoot, err)
		}
		cg = m
	}
	return &Runtime{
		cgroups:       cg,
		panics:        panics,
		act:           map[types.UID]*actuated{},
		qos:           qosTiers{requests: map[types.UID]int64{}, exact: map[types.UID]bool{}},
		rs:            cfg.RuntimeService,
		cfg:           cfg,
		log:           cfg.Logger,
		crashBackoff:  backoff.New(backoff.Policy(cfg.CrashLoopBackOff), cfg.Clock),
		images:        im,
		hashes:        newHashCache(),
		hookTransport: httpget.NewTransport(),
		sandboxKeys:   criclient.ListKeys{Labels: []string{LabelPodUID, LabelPodName, LabelPodNamespace}},
		uidKeys:       criclient.ListKeys{Labels: []string{LabelPodUID}},
		containerKeys: criclient.ListKeys{
			Labels:      []string{LabelPodUID, LabelPodName, LabelPodNamespace},
			Annotations: []string{AnnotationContainerHash},
		},
	}, nil
}

// runtimeType returns the runtime's name, the type part of container IDs,
// asking the runtime once.
func (r *Runtime) runtimeType(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.typ != "" {
		return r.typ, nil
	}
	v, err := r.rs.Version(ctx, "v1")
	if err != nil {
		return "", fmt.Errorf("cri: version: %w", criclient.Wrap("Version", "", err))
	}
	if v.GetRuntimeName() == "" {
		return "", fmt.Errorf("cri: version: no runtime name: %w", runtime.ErrInvalidResponse)
	}
	r.typ = v.GetRuntimeName()
	return r.typ, nil
}

// Status implements runtime.Runtime.
func (r *Runtime) Status(ctx context.Context) (*runtime.Status, error) {
	resp, err := r.rs.Status(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("cri: status: %w", criclient.Wrap("Status", "", err))
	}
	out := &runtime.Status{}
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() == "" {
			return nil, fmt.Errorf("cri: status: a condition has no type: %w", runtime.ErrInvalidResponse)
		}
		out.Conditions = append(out.Conditions, runtime.Condition{Type: c.GetType(), Status: c.GetStatus(), Reason: c.GetReason(), Message: c.GetMessage()})
	}
	return out, nil
}

// GetPods implements runtime.Runtime. Sandboxes and containers without
// the pod UID label were not created by a kubelet-like agent and are not
// listed.
func (r *Runtime) GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error) {
	sf, cf := podFilters(all)
	return r.listPods(ctx, sf, cf, &podList{})
}

// VisitPods implements runtime.PodVisitor: it lists as GetPods does, into
// the memory of its last list, and lends each pod to fn. A VisitPods
// that finds another one under way (or is called again from fn) lists
// into new memory instead.
func (r *Runtime) VisitPods(ctx context.Context, all bool, fn func(*runtime.Pod)) error {
	sf, cf := podFilters(all)
	dst := &podList{}
	if r.visitMu.TryLock() {
		defer r.visitMu.Unlock()
		dst = &r.visitList
	}
	pods, err := r.listPods(ctx, sf, cf, dst)
	if err != nil {
		return err
	}
	for _, p := range pods {
		fn(p)
	}
	return nil
}

// podFilters are GetPods's filters: none, or ready sandboxes and running
// containers.
func podFilters(all bool) (*runtimeapi.PodSandboxFilter, *runtimeapi.ContainerFilter) {
	if all {
		return nil, nil
	}
	return &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		&runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
}

// podList is the memory of one list of pods, which a later list may be
// made into again: the sandboxes and containers, the pods (each with its
// two slices), each pod's place in the block by UID, and the result.
type podList struct {
	objects []runtime.Container
	block   []runtime.Pod
	byUID   map[types.UID]int
	out     []*runtime.Pod
}

// reset readies l for a list of so many sandboxes and containers. The
// objects are allocated in one block, exactly; the pods in another, for
// one per sandbox, which a container without a listed sandbox can
// outgrow: the block may then move, so the pods are found by their place
// in it, and pointed to only once it is complete. Memory made for more
// than four times the objects listed (a node that ran far more pods) is
// let go, all of it, as a map never shrinks.
func (l *podList) reset(sandboxes, containers int) {
	n := sandboxes + containers
	if cap(l.objects) < n || cap(l.objects) > 4*n+64 {
		*l = podList{objects: make([]runtime.Container, n), block: make([]runtime.Pod, 0, sandboxes), byUID: make(map[types.UID]int, sandboxes)}
		return
	}
	// What a longer list left past n would keep its strings alive.
	clear(l.objects[n:cap(l.objects)])
	l.objects = l.objects[:n]
	l.block = l.block[:0]
	clear(l.byUID)
	l.out = l.out[:0]
}

// pod returns the listed pod of the labels (UID, name, namespace), valid
// until the next call, taking the next slot of the block for a new one;
// a slot used by an earlier list keeps its slices' memory.
func (l *podList) pod(labels []string) *runtime.Pod {
	uid := types.UID(labels[0])
	if i, ok := l.byUID[uid]; ok {
		return &l.block[i]
	}
	if len(l.block) < cap(l.block) {
		l.block = l.block[:len(l.block)+1]
	} else {
		l.block = append(l.block, runtime.Pod{})
	}
	p := &l.block[len(l.block)-1]
	*p = runtime.Pod{ID: uid, Name: labels[1], Namespace: labels[2], Sandboxes: p.Sandboxes[:0], Containers: p.Containers[:0]}
	l.byUID[uid] = len(l.block) - 1
	return p
}

// listPods groups the sandboxes and containers the filters select by
// their pod UID label, into l's memory: the result is valid until the
// next list into l. It lists in brief (criclient.ListPodSandboxBrief),
// so that a relist decodes no label or annotation map: a *criclient.Client
// decodes only the three pod labels and the container hash from the
// wire; another RuntimeService is listed in full and projected.
func (r *Runtime) listPods(ctx context.Context, sf *runtimeapi.PodSandboxFilter, cf *runtimeapi.ContainerFilter, l *podList) ([]*runtime.Pod, error) {
	typ, err := r.runtimeType(ctx)
	if err != nil {
		return nil, err
	}
	// The brief values are converted before listPods returns, so the
	// next list may reuse their memory.
	var buf *criclient.BriefBuffer
	if r.listMu.TryLock() {
		defer r.listMu.Unlock()
		buf = &r.listBuf
	}
	// The containers are asked for while the sandboxes are: a list then
	// waits for one round trip to the runtime instead of two, and its
	// goroutines hand over to each other (and wake threads) less often.
	// A container and its sandbox may be listed in either order; as with
	// one list after the other, a container whose sandbox came or went in
	// between can be listed without it.
	var (
		containers []criclient.BriefContainer
		cerr       error
		cpanic     any
		done       = make(chan struct{})
	)
	go func() {
		defer close(done)
		defer func() {
			// Raised again in the caller, which may recover it (a pod
			// worker does).
			if p := recover(); p != nil {
				cpanic = fmt.Sprintf("%v\n\n%s", p, debug.Stack())
			}
		}()
		containers, cerr = criclient.ListContainersBrief(ctx, r.rs, cf, r.containerKeys, buf)
	}()
	sandboxes, err := criclient.ListPodSandboxBrief(ctx, r.rs, sf, r.sandboxKeys, buf)
	<-done
	if cpanic != nil {
		panic(cpanic)
	}
	if err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("cri: get pods: %w", err)
	}
	l.reset(len(sandboxes), len(containers))
	for i := range sandboxes {
		s := &sandboxes[i]
		if len(s.Labels) != len(r.sandboxKeys.Labels) {
			return nil, fmt.Errorf("cri: get pods: sandbox %s: %d label values for %d keys: %w", s.ID, len(s.Labels), len(r.sandboxKeys.Labels), runtime.ErrInvalidResponse)
		}
		if s.Labels[0] == "" {
			l.objects[i] = runtime.Container{}
			continue
		}
		c := &l.objects[i]
		if err := criclient.FromBriefSandbox(typ, s, c); err != nil {
			return nil, err
		}
		p := l.pod(s.Labels)
		p.Sandboxes = append(p.Sandboxes, c)
		if c.CreatedAt.After(p.CreatedAt) {
			p.CreatedAt = c.CreatedAt
		}
	}
	for i := range containers {
		s := &containers[i]
		if len(s.Labels) != len(r.containerKeys.Labels) || len(s.Annotations) != len(r.containerKeys.Annotations) {
			return nil, fmt.Errorf("cri: get pods: container %s: %d label and %d annotation values for %d and %d keys: %w",
				s.ID, len(s.Labels), len(s.Annotations), len(r.containerKeys.Labels), len(r.containerKeys.Annotations), runtime.ErrInvalidResponse)
		}
		if s.Labels[0] == "" {
			l.objects[len(sandboxes)+i] = runtime.Container{}
			continue
		}
		c := &l.objects[len(sandboxes)+i]
		if err := criclient.FromBriefContainer(typ, s, c); err != nil {
			return nil, err
		}
		c.Hash, _ = strconv.ParseUint(s.Annotations[0], 16, 64)
		p := l.pod(s.Labels)
		p.Containers = append(p.Containers, c)
	}
	l.out = slices.Grow(l.out, len(l.block))
	for i := range l.block {
		l.out = append(l.out, &l.block[i])
	}
	slices.SortFunc(l.out, func(a, b *runtime.Pod) int { return cmp.Compare(a.ID, b.ID) })
	return l.out, nil
}

// GetPodStatus implements runtime.Runtime.
func (r *Runtime) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	typ, err := r.runtimeType(ctx)
	if err != nil {
		return nil, err
	}
	ps := &runtime.PodStatus{ID: uid, Name: name, Namespace: namespace, Timestamp: r.cfg.Clock.Now()}
	sel := map[string]string{LabelPodUID: string(uid)}
	sandboxes, err := r.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("cri: pod %s/%s status: %w", namespace, name, criclient.Wrap("ListPodSandbox", "", err))
	}
	sort.SliceStable(sandboxes, func(i, j int) bool {
		a, b := sandboxes[i], sandboxes[j]
		if a.GetCreatedAt() != b.GetCreatedAt() {
			return a.GetCreatedAt() > b.GetCreatedAt()
		}
		return a.GetMetadata().GetAttempt() > b.GetMetadata().GetAttempt()
	})
	for i, s := range sandboxes {
		resp, err := r.rs.PodSandboxStatus(ctx, s.GetId(), false)
		if criclient.IsNotFound(err) {
			continue // removed since the list
		}
		if err != nil {
			return nil, fmt.Errorf("cri: pod %s/%s status: %w", namespace, name, criclient.Wrap("PodSandboxStatus", s.GetId(), err))
		}
		st, err := criclient.FromSandboxStatus(resp.GetStatus())
		if err != nil {
			return nil, fmt.Errorf("cri: pod %s/%s status: %w", namespace, name, err)
		}
		ps.SandboxStatuses = append(ps.SandboxStatuses, st)
		if i == 0 && st.State == runtime.SandboxStateReady {
			ps.IPs = st.IPs
		}
	}
	containers, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("cri: pod %s/%s status: %w", namespace, name, criclient.Wrap("ListContainers", "", err))
	}
	for _, c := range containers {
		resp, err := r.rs.ContainerStatus(ctx, c.GetId(), false)
		if criclient.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cri: pod %s/%s status: %w", namespace, name, criclient.Wrap("ContainerStatus", c.GetId(), err))
		}
		st, err := fromContainerStatus(typ, resp.GetStatus(), c.GetPodSandboxId())
		if err != nil {
			return nil, fmt.Errorf("cri: pod %s/%s status: %w", namespace, name, err)
		}
		if st.State == runtime.ContainerStateExited {
			if msg := terminationMessage(resp.GetStatus()); msg != "" {
				if st.Message != "" {
					st.Message += ": "
				}
				st.Message += msg
			}
		}
		if st.State == runtime.ContainerStateRunning {
			r.addActuated(uid, st)
		}
		ps.ContainerStatuses = append(ps.ContainerStatuses, st)
	}
	// Newest first; instances created in the same instant are ordered by
	// the restart count recorded on them.
	sort.SliceStable(ps.ContainerStatuses, func(i, j int) bool {
		a, b := ps.ContainerStatuses[i], ps.ContainerStatuses[j]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.RestartCount > b.RestartCount
	})
	return ps, nil
}

func podRef(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
