package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/status"
)

// StatusSinkConfig configures a StatusSink.
type StatusSinkConfig struct {
	// Client talks to the API server; the node's identity suffices.
	// Required. Its rest.Config's QPS and Burst also limit the sink, with
	// every other user of the client.
	Client kubernetes.Interface
	// QPS is how many statuses a second the sink writes at most, on
	// average; each UpdatePodStatus (a read and, when needed, a patch)
	// takes one token. Zero means no limit of the sink's own.
	QPS float64
	// Burst is how many statuses may be written at once above QPS.
	// Default: QPS rounded up (at least 1) when QPS is set.
	Burst int
	// MirrorPods makes the sink write the status of a static pod to its
	// mirror pod (made by a MirrorPods): the pod of the same name whose
	// kubernetes.io/config.mirror annotation is the static pod's hash. A
	// static pod without one yet gets ErrNoMirrorPod, which the
	// status.Manager retries. Default false: static pods are skipped.
	MirrorPods bool
	// RequestTimeout bounds each call to the API server. Default 10s.
	RequestTimeout time.Duration
	// Clock paces the rate limit. Default: the real clock.
	Clock clock.Clock
	// Logger receives the sink's logs. Default: discarded.
	Logger logr.Logger
}

// ErrNoMirrorPod is returned (wrapped) by StatusSink.UpdatePodStatus for
// a static pod whose mirror pod does not exist yet, or is an older
// one: the status is to be retried once MirrorPods has made it.
var ErrNoMirrorPod = errors.New("kube: the static pod has no mirror pod yet")

// StatusSink is a status.Sink that writes pod statuses to the API server
// through the pods/status subresource, as the kubelet's status manager
// does. Give it to status.Config.Sink; the status.Manager calls it with
// the newest status of a pod, one call at a time, and retries what it
// refuses, so an API server that is away loses no status: the newest one
// is written when it is back.
//
// For each status it reads the pod and merges the new status into the
// API's: the node's status is written whole (container statuses with
// their resources, allocatedResources and user; the pod's resources and
// allocatedResources), except that the phase never leaves Failed or
// Succeeded; the conditions the kubelet owns (PodScheduled,
// PodReadyToStartContainers, Initialized, ContainersReady, Ready,
// AllContainersRestarting, and the resize conditions) are replaced, and
// every other condition (a readiness gate's, DisruptionTarget) stays the
// API's, except that as the pod turns Failed or Succeeded the status's
// DisruptionTarget (the node's, of a pod it evicted, preempted or shut
// down; else the one the status kept from the pod's own) is written, in
// place of one another component set, as the kubelet's status manager
// sends it then; other components' conditions come first, then the
// kubelet's, in the kubelet's order; nominatedNodeName and
// resourceClaimStatuses stay the API's, and so does qosClass when the
// status has none; podIPs and hostIPs are filled from podIP and hostIP
// when the status has only those, as the API server does. When the merge
// changes nothing the pod is not patched. The patch is a strategic merge
// patch carrying the pod's UID, so it never lands on a new pod of the
// same name. Pods gone from the API server are skipped without error.
// Static pods are written to their mirror pods when
// StatusSinkConfig.MirrorPods is set, and skipped otherwise.
//
// With StatusSinkConfig.QPS set, UpdatePodStatus waits for a token of a
// token bucket on StatusSinkConfig.Clock before it calls the API server,
// so a burst of status changes (a node starting many pods) reaches the
// API server at most at that rate; the status.Manager coalesces the
// statuses of a pod meanwhile, so only the newest one is written.
type StatusSink struct {
	cfg     StatusSinkConfig
	limiter *rate.Limiter // nil: no limit

	patched atomic.Int64
	skipped atomic.Int64
}

var _ status.Reconciler = (*StatusSink)(nil)

// NewStatusSink checks cfg. It does no I/O and starts nothing.
func NewStatusSink(cfg StatusSinkConfig) (*StatusSink, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: StatusSinkConfig.Client is required")
	}
	if err := defaultDuration("StatusSinkConfig", "RequestTimeout", &cfg.RequestTimeout, DefaultRequestTimeout); err != nil {
		return nil, err
	}
	if cfg.QPS < 0 || math.IsNaN(cfg.QPS) || math.IsInf(cfg.QPS, 0) {
		return nil, fmt.Errorf("kube: StatusSinkConfig.QPS %v is not a rate", cfg.QPS)
	}
	if cfg.Burst < 0 {
		return nil, fmt.Errorf("kube: StatusSinkConfig.Burst %d is negative", cfg.Burst)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	s := &StatusSink{cfg: cfg}
	if cfg.QPS > 0 {
		if cfg.Burst == 0 {
			cfg.Burst = max(1, int(math.Ceil(cfg.QPS)))
			s.cfg.Burst = cfg.Burst
		}
		// The limiter is given the clock's time on every call, so it
		// never reads the real clock itself.
		s.limiter = rate.NewLimiter(rate.Limit(cfg.QPS), cfg.Burst)
		s.limiter.AllowN(cfg.Clock.Now(), 0) // start its bucket full, at the clock's now
	}
	return s, nil
}

// wait takes a token of the rate limit, waiting on the clock; the error
// is ctx's when it ends first.
func (s *StatusSink) wait(ctx context.Context) error {
	if s.limiter == nil {
		return nil
	}
	now := s.cfg.Clock.Now()
	r := s.limiter.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	t := s.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		r.CancelAt(s.cfg.Clock.Now())
		return ctx.Err()
	}
}

// Patched returns how many statuses were patched. Safe for concurrent use.
func (s *StatusSink) Patched() int64 { return s.patched.Load() }

// Skipped returns how many statuses were not patched because the API
// server had them already. Safe for concurrent use.
func (s *StatusSink) Skipped() int64 { return s.skipped.Load() }

// UpdatePodStatus implements status.Sink. It blocks for at most two calls
// to the API server (a read and a patch). The error wraps the API
// server's (apierrors classifies it); the status.Manager retries it.
func (s *StatusSink) UpdatePodStatus(ctx context.Context, pod *v1.Pod, st v1.PodStatus) error {
	static := pod.Annotations[podsource.AnnotationConfigSource] != podsource.SourceAPI
	if static && !s.cfg.MirrorPods {
		return nil
	}
	if err := s.wait(ctx); err != nil {
		return fmt.Errorf("kube: pod %s/%s status: rate limit: %w", pod.Namespace, pod.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	pods := s.cfg.Client.CoreV1().Pods(pod.Namespace)
	cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if static {
			return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, ErrNoMirrorPod)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("kube: get pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	switch {
	case static && (cur.Annotations[podsource.AnnotationConfigMirror] != staticHash(pod) || cur.DeletionTimestamp != nil):
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, ErrNoMirrorPod)
	case !static && cur.UID != pod.UID:
		return nil
	}
	merged := mergePodStatus(cur.Status, st, s.cfg.Clock.Now())
	if equality.Semantic.DeepEqual(cur.Status, merged) {
		s.skipped.Add(1)
		return nil
	}
	if cur.Status.Phase != merged.Phase || len(cur.Status.Conditions) != len(merged.Conditions) {
		s.cfg.Logger.V(2).Info("patching pod status", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "phase", merged.Phase)
	}
	data, err := podStatusPatch(cur.UID, cur.Status, merged)
	if err != nil {
		return err
	}
	if _, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "status"); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("kube: patch pod %s/%s status: %w", pod.Namespace, pod.Name, err)
	}
	s.patched.Add(1)
	return nil
}

// NeedsReconcile implements status.Reconciler: whether the API server's
// status of pod (pod.Status, as a watch delivered it) differs from what
// UpdatePodStatus would write of st, as the kubelet's status manager
// compares them (isPodStatusByKubeletEqual): the kubelet's conditions
// and DisruptionTarget by status, reason and message only, other
// components' conditions and the claims' statuses not at all, the rest
// whole. The status.Manager then writes it again; the kubelet's status
// manager so restores a status another writer changed. Static pods are
// never reconciled here: their API object is the mirror pod, which the
// agent does not see.
func (s *StatusSink) NeedsReconcile(pod *v1.Pod, st v1.PodStatus) bool {
	if pod.Annotations[podsource.AnnotationConfigSource] != podsource.SourceAPI {
		return false
	}
	return !sameByKubelet(pod.Status, mergePodStatus(pod.Status, st, s.cfg.Clock.Now()))
}

// sameByKubelet is the kubelet's isPodStatusByKubeletEqual.
func sameByKubelet(a, b v1.PodStatus) bool {
	ca, cb := kubeletsConditions(a.Conditions), kubeletsConditions(b.Conditions)
	if len(ca) != len(cb) {
		return false
	}
	for t, c := range cb {
		o, ok := ca[t]
		if !ok || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message {
			return false
		}
	}
	a.Conditions, b.Conditions = nil, nil
	a.ResourceClaimStatuses, b.ResourceClaimStatuses = nil, nil
	a.ExtendedResourceClaimStatus, b.ExtendedResourceClaimStatus = nil, nil
	a.NodeAllocatableResourceClaimStatuses, b.NodeAllocatableResourceClaimStatuses = nil, nil
	return equality.Semantic.DeepEqual(a, b)
}

// kubeletsConditions are the conditions of cs the kubelet writes: its
// own and DisruptionTarget, by type.
func kubeletsConditions(cs []v1.PodCondition) map[v1.PodConditionType]*v1.PodCondition {
	out := make(map[v1.PodConditionType]*v1.PodCondition, len(cs))
	for i := range cs {
		if status.OwnedByKubelet(cs[i].Type) || cs[i].Type == v1.DisruptionTarget {
			out[cs[i].Type] = &cs[i]
		}
	}
	return out
}

// mergePodStatus merges the node's status st into the API's status old;
// now stamps a readiness condition it turns false and the node's
// DisruptionTarget as it is written.
func mergePodStatus(old, st v1.PodStatus, now time.Time) v1.PodStatus {
	merged := *st.DeepCopy()
	if (old.Phase == v1.PodFailed || old.Phase == v1.PodSucceeded) && merged.Phase != old.Phase {
		merged.Phase = old.Phase
	}
	// A condition the node does not own keeps the API's value, first, as
	// the kubelet's status manager orders them, and the node's other
	// conditions are not written, except its DisruptionTarget (an
	// eviction, a preemption, a shutdown): that goes as the pod turns
	// terminal, in place of one another component set, as the kubelet's
	// status manager sends it then, with the time of its sending as its
	// transition time unless the API's has the same status.
	var conds []v1.PodCondition
	for _, c := range old.Conditions {
		if !status.OwnedByKubelet(c.Type) {
			conds = append(conds, c)
		}
	}
	for _, c := range merged.Conditions {
		if status.OwnedByKubelet(c.Type) {
			conds = append(conds, c)
		}
	}
	if i := conditionIndex(merged.Conditions, v1.DisruptionTarget); i >= 0 && !podutil.IsTerminal(old.Phase) && podutil.IsTerminal(merged.Phase) {
		c := merged.Conditions[i]
		c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		if j := conditionIndex(conds, c.Type); j >= 0 {
			if conds[j].Status == c.Status {
				c.LastTransitionTime = conds[j].LastTransitionTime
			}
			conds[j] = c
		} else {
			conds = append(conds, c)
		}
	}
	merged.Conditions = conds
	merged.NominatedNodeName = old.NominatedNodeName
	// The claims' statuses are the scheduler's and the DRA controllers':
	// a node that changes them is refused by the NodeRestriction
	// admission plugin.
	merged.ResourceClaimStatuses = old.ResourceClaimStatuses
	merged.ExtendedResourceClaimStatus = old.ExtendedResourceClaimStatus
	merged.NodeAllocatableResourceClaimStatuses = old.NodeAllocatableResourceClaimStatuses
	// A terminal pod is never written ready (the kubelet's
	// mergePodStatus; issues.k8s.io/108594): the node's readiness may lag
	// its phase, or the phase be the API's terminal one kept above.
	if podutil.IsTerminal(merged.Phase) && (conditionTrue(merged.Conditions, v1.PodReady) || conditionTrue(merged.Conditions, v1.ContainersReady)) {
		reason := status.ReasonPodFailed
		if merged.Phase == v1.PodSucceeded {
			reason = status.ReasonPodCompleted
		}
		for _, t := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
			setCondition(&merged, v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: reason}, now)
			// The API's transition time when it has the condition False
			// already, so that writing the same status again changes
			// nothing.
			if j := conditionIndex(old.Conditions, t); j >= 0 && old.Conditions[j].Status == v1.ConditionFalse {
				merged.Conditions[conditionIndex(merged.Conditions, t)].LastTransitionTime = old.Conditions[j].LastTransitionTime
			}
		}
	}
	// What the API server fills in when the status leaves it out: the
	// lists from the single addresses, and the QoS class it computed.
	// Patching them away would change the pod on every write.
	if len(merged.PodIPs) == 0 && merged.PodIP != "" {
		merged.PodIPs = []v1.PodIP{{IP: merged.PodIP}}
	}
	if len(merged.HostIPs) == 0 && merged.HostIP != "" {
		merged.HostIPs = []v1.HostIP{{IP: merged.HostIP}}
	}
	if merged.QOSClass == "" {
		merged.QOSClass = old.QOSClass
	}
	// A status made from an older spec than the API's last one does not
	// take the observed generation back, as with the kubelet.
	if old.ObservedGeneration > merged.ObservedGeneration {
		merged.ObservedGeneration = old.ObservedGeneration
	}
	return merged
}

func conditionTrue(cs []v1.PodCondition, t v1.PodConditionType) bool {
	i := conditionIndex(cs, t)
	return i >= 0 && cs[i].Status == v1.ConditionTrue
}

// setCondition puts c in st, in place of the condition of its type or
// appended, as the kubelet's UpdatePodCondition does: the transition time
// is now when the status changes (or the condition is new), else the old
// one; the observed generation is the old condition's.
func setCondition(st *v1.PodStatus, c v1.PodCondition, now time.Time) {
	c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	i := conditionIndex(st.Conditions, c.Type)
	if i < 0 {
		c.ObservedGeneration = st.ObservedGeneration
		st.Conditions = append(st.Conditions, c)
		return
	}
	old := st.Conditions[i]
	if old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	c.ObservedGeneration = old.ObservedGeneration
	st.Conditions[i] = c
}

// conditionIndex is the index of the condition of type t in cs, or -1.
func conditionIndex(cs []v1.PodCondition, t v1.PodConditionType) int {
	for i := range cs {
		if cs[i].Type == t {
			return i
		}
	}
	return -1
}

// podStatusPatch is the strategic merge patch from old to st, with the
// pod's UID in it: the API server refuses it for another pod.
func podStatusPatch(uid types.UID, old, st v1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(v1.Pod{Status: old})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: st})
	if err != nil {
		return nil, err
	}
	data, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("kube: pod status patch: %w", err)
	}
	return data, nil
}
