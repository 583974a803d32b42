package kube

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

const (
	goos   = goruntime.GOOS
	goarch = goruntime.GOARCH
)

// Back-off bounds, the kubelet's: registration waits 100ms after its first
// failure and doubles up to 7s; a failed Lease renewal is retried after
// 200ms, doubling up to 7s (or the renew interval if shorter).
const (
	registerBackoffInitial = 100 * time.Millisecond
	leaseBackoffInitial    = 200 * time.Millisecond
	maxBackoff             = 7 * time.Second
	// statusUpdateRetries is how many times one status sync tries to
	// patch before it waits for the next period.
	statusUpdateRetries = 5
)

// Node registers a node with the API server, keeps its status current and
// renews its Lease. Create it with NewNode and start it with Run.
type Node struct {
	cfg    NodeConfig
	client kubernetes.Interface
	clock  clock.WithTicker
	log    logr.Logger

	registered chan struct{} // closed once the Node exists

	// mu guards the fields below; Run's goroutines share them.
	mu sync.Mutex
	// uid is the Node object's UID, the Lease's owner.
	uid types.UID
	// lastReport is when the status was last patched.
	lastReport time.Time
	// runtimeVersion is the last containerRuntimeVersion obtained.
	runtimeVersion string

	// lease is the last Lease written or read; only the lease loop uses it.
	lease *coordinationv1.Lease
}

// NewNode checks and defaults cfg. It does no I/O and starts nothing.
func NewNode(cfg NodeConfig) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Node{
		cfg:        cfg,
		client:     cfg.Client,
		clock:      cfg.Clock,
		log:        cfg.Logger.WithValues("node", cfg.Name),
		registered: make(chan struct{}),
	}, nil
}

// Registered is closed once the Node object exists in the API server
// (created or adopted). Safe for concurrent use.
func (n *Node) Registered() <-chan struct{} { return n.registered }

// Run registers the node, retrying with back-off until the API server
// accepts it, then patches its status every NodeStatusUpdateFrequency when
// it changed (and at least every NodeStatusReportFrequency) and renews its
// Lease every LeaseRenewInterval, until ctx ends. It returns nil when ctx
// ends, after its goroutines have stopped. Run must be called once.
func (n *Node) Run(ctx context.Context) error {
	n.cfg.Events(nil, v1.EventTypeNormal, "Starting", "Starting node agent.")
	if !n.registerWithBackoff(ctx) {
		return nil
	}
	close(n.registered)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { n.statusLoop(ctx); return nil })
	g.Go(func() error { n.leaseLoop(ctx); return nil })
	return g.Wait()
}

// registerWithBackoff tries to register until it succeeds (true) or ctx
// ends (false).
func (n *Node) registerWithBackoff(ctx context.Context) bool {
	delay := registerBackoffInitial
	for {
		err := n.register(ctx)
		if err == nil {
			return true
		}
		n.log.Error(err, "cannot register the node; retrying", "after", delay)
		if !n.wait(ctx, delay) {
			return false
		}
		delay = min(2*delay, maxBackoff)
	}
}

// wait waits d on the clock; false if ctx ended first.
func (n *Node) wait(ctx context.Context, d time.Duration) bool {
	t := n.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// register makes one attempt to create the Node or adopt an existing one.
func (n *Node) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	node := n.initialNode(ctx)
	created, err := n.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		n.setUID(created.UID)
		n.log.Info("registered the node")
		n.cfg.Events(nil, v1.EventTypeNormal, "RegisteredNode", "Registered node "+n.cfg.Name)
		n.readyEvent(nil, created)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube: register node %s: %w", n.cfg.Name, err)
	}
	existing, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kube: adopt node %s: %w", n.cfg.Name, err)
	}
	updated := existing.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range n.labels() {
		updated.Labels[k] = v
	}
	if !equalMaps(existing.Labels, updated.Labels) {
		if existing, err = n.patchNode(ctx, existing, updated, ""); err != nil {
			return fmt.Errorf("kube: adopt node %s: labels: %w", n.cfg.Name, err)
		}
	}
	n.setUID(existing.UID)
	n.log.Info("adopted the existing node")
	return nil
}

// labels returns the labels Node sets: the custom ones, then the
// well-known ones, which win.
func (n *Node) labels() map[string]string {
	l := copyMap(n.cfg.Labels)
	info, _ := n.cfg.SystemInfo()
	l[v1.LabelHostname] = n.cfg.Hostname
	l[v1.LabelOSStable] = orDefault(info.OperatingSystem, goos)
	l[v1.LabelArchStable] = orDefault(info.Architecture, goarch)
	return l
}

// initialNode is the Node created at registration, status included.
func (n *Node) initialNode(ctx context.Context) *v1.Node {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Labels: n.labels()},
		Spec:       v1.NodeSpec{Taints: append([]v1.Taint(nil), n.cfg.Taints...)},
	}
	n.setStatus(ctx, node, nil)
	return node
}

// readyEvent sends NodeReady or NodeNotReady when the Ready condition of
// updated differs from orig's (nil: a new Node), as the kubelet does.
func (n *Node) readyEvent(orig, updated *v1.Node) {
	now := findCondition(updated.Status.Conditions, v1.NodeReady)
	if now == nil {
		return
	}
	if orig != nil {
		if prev := findCondition(orig.Status.Conditions, v1.NodeReady); prev != nil && prev.Status == now.Status {
			return
		}
	}
	reason := "NodeReady"
	if now.Status != v1.ConditionTrue {
		reason = "NodeNotReady"
	}
	n.cfg.Events(nil, v1.EventTypeNormal, reason, fmt.Sprintf("Node %s status is now: %s", n.cfg.Name, reason))
}

func (n *Node) setUID(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.uid = uid
}

func (n *Node) nodeUID() types.UID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.uid
}

// patchNode sends the strategic merge patch from old to updated, to the
// subresource ("" or "status"), and returns the server's Node.
func (n *Node) patchNode(ctx context.Context, old, updated *v1.Node, subresource string) (*v1.Node, error) {
	data, err := nodePatch(old, updated)
	if err != nil {
		return nil, err
	}
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	return n.client.CoreV1().Nodes().Patch(ctx, n.cfg.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, sub...)
}

func nodePatch(old, updated *v1.Node) ([]byte, error) {
	oldJSON, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(updated)
	if err != nil {
		return nil, err
	}
	data, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("kube: node patch: %w", err)
	}
	return data, nil
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
