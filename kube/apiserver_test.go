package kube_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/kube/internal/apiservertest"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/status"
)

// eventually polls cond every 100ms for at most d, failing with the last
// state it described.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last state: %s", what, d, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodeSees waits until the node's client may read the pod: the Node
// authorizer learns that a pod is bound to a node from its own watch,
// a moment after the pod was created, as a node agent learns of it from
// its watch.
func nodeSees(t *testing.T, node kubernetes.Interface, namespace, name string) {
	t.Helper()
	eventually(t, 10*time.Second, "the node may read pod "+namespace+"/"+name, func() (bool, string) {
		_, err := node.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

type health struct {
	mu  sync.Mutex
	err error
}

func (h *health) set(err error) { h.mu.Lock(); h.err = err; h.mu.Unlock() }
func (h *health) get() error    { h.mu.Lock(); defer h.mu.Unlock(); return h.err }

// runNode runs a Node for name with the node's own credentials until the
// test ends.
func runNode(t *testing.T, s *apiservertest.Server, name string, h *health, labels map[string]string) *kube.Node {
	t.Helper()
	client := kubernetes.NewForConfigOrDie(s.NodeConfig(t, name))
	n, err := kube.NewNode(kube.NodeConfig{
		Client:                    client,
		Name:                      name,
		Labels:                    labels,
		Taints:                    []v1.Taint{{Key: "example.com/fresh", Effect: v1.TaintEffectNoSchedule}},
		Health:                    h.get,
		NodeStatusUpdateFrequency: 500 * time.Millisecond,
		LeaseDuration:             4 * time.Second,
		LeaseRenewInterval:        time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	select {
	case <-n.Registered():
	case <-time.After(30 * time.Second):
		t.Fatalf("node %s did not register within 30s", name)
	}
	return n
}

// TestAgainstAPIServer runs Nodes against a real kube-apiserver with the
// node identity (Node authorizer and NodeRestriction).
func TestAgainstAPIServer(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{Nodes: []string{"node-a", "node-b"}})
	admin := kubernetes.NewForConfigOrDie(s.AdminConfig())
	ctx := context.Background()

	// node-b exists before its agent starts, with an administrator's label.
	_, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "node-b", Labels: map[string]string{"admin.example.com/rack": "r1", "node.kubernetes.io/role": "old"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ha, hb := &health{}, &health{}
	runNode(t, s, "node-a", ha, map[string]string{"node.kubernetes.io/role": "edge"})
	runNode(t, s, "node-b", hb, map[string]string{"node.kubernetes.io/role": "edge"})

	t.Run("registered and Ready", func(t *testing.T) {
		node, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Labels[v1.LabelHostname] != "node-a" || node.Labels["node.kubernetes.io/role"] != "edge" {
			t.Errorf("labels = %v", node.Labels)
		}
		// The API server's TaintNodesByCondition admission adds not-ready.
		fresh := false
		for _, taint := range node.Spec.Taints {
			fresh = fresh || taint.Key == "example.com/fresh"
		}
		if !fresh {
			t.Errorf("taints = %v; want registerWithTaints' example.com/fresh", node.Spec.Taints)
		}
		eventually(t, 20*time.Second, "node-a Ready with capacity", func() (bool, string) {
			node, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ready := conditionOf(node, v1.NodeReady)
			pods := node.Status.Allocatable[v1.ResourcePods]
			return ready != nil && ready.Status == v1.ConditionTrue && pods.Value() == 110 && node.Status.NodeInfo.KubeletVersion == kube.DefaultKubeletVersion,
				fmt.Sprintf("conditions %v allocatable %v nodeInfo %+v", node.Status.Conditions, node.Status.Allocatable, node.Status.NodeInfo)
		})
	})

	t.Run("adopted node keeps other labels", func(t *testing.T) {
		node, err := admin.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Labels["admin.example.com/rack"] != "r1" || node.Labels["node.kubernetes.io/role"] != "edge" || node.Labels[v1.LabelOSStable] == "" {
			t.Fatalf("adopted node labels = %v; want the admin's rack kept, role and os set", node.Labels)
		}
	})

	t.Run("status change visible", func(t *testing.T) {
		ha.set(errors.New("runtime is down"))
		eventually(t, 20*time.Second, "node-a NotReady", func() (bool, string) {
			node, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ready := conditionOf(node, v1.NodeReady)
			return ready != nil && ready.Status == v1.ConditionFalse && ready.Message == "runtime is down", fmt.Sprintf("%+v", ready)
		})
		ha.set(nil)
		eventually(t, 20*time.Second, "node-a Ready again", func() (bool, string) {
			node, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ready := conditionOf(node, v1.NodeReady)
			return ready != nil && ready.Status == v1.ConditionTrue, fmt.Sprintf("%+v", ready)
		})
	})

	t.Run("lease renewed and owned by the node", func(t *testing.T) {
		node, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var first *coordinationv1.Lease
		eventually(t, 20*time.Second, "node-a's lease", func() (bool, string) {
			first, err = admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node-a", metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
		if len(first.OwnerReferences) != 1 || first.OwnerReferences[0].UID != node.UID || first.OwnerReferences[0].Kind != "Node" {
			t.Errorf("lease owners = %+v; want the Node (uid %s)", first.OwnerReferences, node.UID)
		}
		if d := first.Spec.LeaseDurationSeconds; d == nil || *d != 4 {
			t.Errorf("leaseDurationSeconds = %v, want 4", d)
		}
		eventually(t, 20*time.Second, "node-a's lease renewed", func() (bool, string) {
			l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node-a", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return l.Spec.RenewTime.After(first.Spec.RenewTime.Time), fmt.Sprintf("renewTime %v, first %v", l.Spec.RenewTime, first.Spec.RenewTime)
		})
	})

	t.Run("pod source sees the node's pods and their graceful deletion", func(t *testing.T) {
		updates := runSource(t, kubernetes.NewForConfigOrDie(s.NodeConfig(t, "node-a")), "node-a")
		if _, names := nextSet(t, updates); len(names) != 0 {
			t.Fatalf("first SET = %v, want empty", names)
		}
		for _, p := range []*v1.Pod{apiPod("default", "mine", "", "node-a", 0), apiPod("default", "theirs", "", "node-b", 0)} {
			if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var u podsource.Update
		var names []string
		for i := 0; i < 10 && len(names) == 0; i++ {
			u, names = nextSet(t, updates)
		}
		if d := cmp.Diff([]string{"default/mine"}, names); d != "" {
			t.Fatalf("SET after the creates (-want +got):\n%s", d)
		}
		uid := u.Pods[0].UID
		grace := int64(30)
		if err := admin.CoreV1().Pods("default").Delete(ctx, "mine", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			u, _ = nextSet(t, updates)
			if len(u.Pods) == 1 && u.Pods[0].DeletionTimestamp != nil {
				break
			}
			if i == 10 {
				t.Fatalf("no SET with the pod being deleted after 10 updates; last %+v", u.Pods)
			}
		}
		if p := u.Pods[0]; p.UID != uid || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
			t.Fatalf("deleting pod %s grace %v; want %s with 30", p.UID, p.DeletionGracePeriodSeconds, uid)
		}
		// The node finishes the deletion, as the kubelet does once the
		// containers are gone, and the pod leaves the SET.
		zero := int64(0)
		a := kubernetes.NewForConfigOrDie(s.NodeConfig(t, "node-a"))
		if err := a.CoreV1().Pods("default").Delete(ctx, "mine", metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
			t.Fatalf("node-a deletes its pod with grace 0: %v", err)
		}
		for i := 0; len(u.Pods) != 0; i++ {
			if i == 10 {
				t.Fatalf("the pod is still in the SET after 10 updates: %+v", u.Pods)
			}
			u, _ = nextSet(t, updates)
		}
		if err := a.CoreV1().Pods("default").Delete(ctx, "theirs", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("node-a deletes node-b's pod: %v; want Forbidden", err)
		}
	})

	t.Run("pod deleter finishes a graceful deletion with the node's identity", func(t *testing.T) {
		a := kubernetes.NewForConfigOrDie(s.NodeConfig(t, "node-a"))
		d, err := kube.NewPodDeleter(kube.PodDeleterConfig{Client: a})
		if err != nil {
			t.Fatal(err)
		}
		created, err := admin.CoreV1().Pods("default").Create(ctx, apiPod("default", "finish", "", "node-a", 0), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodeSees(t, a, "default", "finish")
		// Not being deleted: left alone.
		if err := d.PodTerminated(ctx, sourced(created)); err != nil || d.Deleted() != 0 {
			t.Fatalf("a pod without deletionTimestamp: err %v, deleted %d; want nil, 0", err, d.Deleted())
		}
		grace := int64(30)
		if err := admin.CoreV1().Pods("default").Delete(ctx, "finish", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			t.Fatal(err)
		}
		deleting, err := admin.CoreV1().Pods("default").Get(ctx, "finish", metav1.GetOptions{})
		if err != nil || deleting.DeletionTimestamp == nil {
			t.Fatalf("after a graceful delete: %v, %+v; want the pod with a deletionTimestamp", err, deleting)
		}
		// A mirror pod and a pod of another UID (a new pod of the same name)
		// are not deleted.
		mirror := sourced(deleting)
		mirror.Annotations[podsource.AnnotationConfigMirror] = "hash"
		other := sourced(deleting)
		other.UID = "another-uid"
		for _, p := range []*v1.Pod{mirror, other} {
			if err := d.PodTerminated(ctx, p); err != nil {
				t.Fatalf("PodTerminated(%s) = %v", p.UID, err)
			}
		}
		if _, err := admin.CoreV1().Pods("default").Get(ctx, "finish", metav1.GetOptions{}); err != nil || d.Deleted() != 0 {
			t.Fatalf("after a mirror pod and another UID: get %v, deleted %d; want the pod still there", err, d.Deleted())
		}
		// The object stays until its final status is in the API server.
		if err := d.PodTerminated(ctx, sourced(deleting)); !errors.Is(err, kube.ErrFinalStatusPending) || d.Deleted() != 0 {
			t.Fatalf("PodTerminated before the final status = %v, deleted %d; want ErrFinalStatusPending, 0", err, d.Deleted())
		}
		final := deleting.DeepCopy()
		final.Status.Phase = v1.PodFailed
		if _, err := admin.CoreV1().Pods("default").UpdateStatus(ctx, final, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := d.PodTerminated(ctx, sourced(deleting)); err != nil || d.Deleted() != 1 {
			t.Fatalf("PodTerminated = %v, deleted %d; want nil, 1", err, d.Deleted())
		}
		if _, err := admin.CoreV1().Pods("default").Get(ctx, "finish", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("get after PodTerminated = %v; want NotFound (grace 0 removes the object)", err)
		}
		// Again, the pod being gone: nil.
		if err := d.PodTerminated(ctx, sourced(deleting)); err != nil || d.Deleted() != 1 {
			t.Fatalf("PodTerminated on a gone pod = %v, deleted %d; want nil, 1", err, d.Deleted())
		}
		// node-b's pod cannot be deleted by node-a.
		theirs, err := admin.CoreV1().Pods("default").Create(ctx, apiPod("default", "finish-b", "", "node-b", 0), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.CoreV1().Pods("default").Delete(ctx, "finish-b", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			t.Fatal(err)
		}
		theirs, err = admin.CoreV1().Pods("default").Get(ctx, "finish-b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.PodTerminated(ctx, sourced(theirs)); !apierrors.IsForbidden(err) {
			t.Fatalf("node-a finishes node-b's pod: %v; want Forbidden", err)
		}
	})

	t.Run("status sink patches its pods' status", func(t *testing.T) {
		a := kubernetes.NewForConfigOrDie(s.NodeConfig(t, "node-a"))
		sink, err := kube.NewStatusSink(kube.StatusSinkConfig{Client: a})
		if err != nil {
			t.Fatal(err)
		}
		created, err := admin.CoreV1().Pods("default").Create(ctx, apiPod("default", "status", "", "node-a", 0), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodeSees(t, a, "default", "status")
		st := running("10.0.0.5")
		st.ContainerStatuses[0].Image = "busybox"
		if err := sink.UpdatePodStatus(ctx, sourced(created), st); err != nil {
			t.Fatalf("node-a patches its pod's status: %v", err)
		}
		got, err := admin.CoreV1().Pods("default").Get(ctx, "status", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != v1.PodRunning || got.Status.PodIP != "10.0.0.5" || len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].RestartCount != 2 {
			t.Fatalf("status seen by the admin = %+v", got.Status)
		}
		if err := sink.UpdatePodStatus(ctx, sourced(created), st); err != nil || sink.Patched() != 1 || sink.Skipped() != 1 {
			t.Fatalf("the same status again: err %v, patched %d, skipped %d; want nil, 1, 1", err, sink.Patched(), sink.Skipped())
		}
		theirs, err := admin.CoreV1().Pods("default").Get(ctx, "theirs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.UpdatePodStatus(ctx, sourced(theirs), st); !apierrors.IsForbidden(err) {
			t.Fatalf("node-a patches node-b's pod's status: %v; want Forbidden", err)
		}
	})

	t.Run("a node cannot touch another node", func(t *testing.T) {
		a := kubernetes.NewForConfigOrDie(s.NodeConfig(t, "node-a"))
		patch := []byte(`{"metadata":{"labels":{"example.com/x":"y"}}}`)
		if _, err := a.CoreV1().Nodes().Patch(ctx, "node-b", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node-a patches node-b: %v; want Forbidden", err)
		}
		status := []byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Evil"}]}}`)
		if _, err := a.CoreV1().Nodes().Patch(ctx, "node-b", types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); !apierrors.IsForbidden(err) {
			t.Errorf("node-a patches node-b's status: %v; want Forbidden", err)
		}
		if _, err := a.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node-b", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node-a reads node-b's lease: %v; want Forbidden", err)
		}
		// A Node configured with another node's name cannot register.
		n, err := kube.NewNode(kube.NodeConfig{Client: a, Name: "node-c"})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := n.Run(rctx); err != nil {
			t.Fatalf("Run = %v", err)
		}
		select {
		case <-n.Registered():
			t.Fatal("node-a's credentials registered node-c")
		default:
		}
		if _, err := admin.CoreV1().Nodes().Get(ctx, "node-c", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("node-c exists: %v", err)
		}
	})

	t.Run("an API server outage loses no status and the lease comes back", func(t *testing.T) {
		a := kubernetes.NewForConfigOrDie(s.NodeConfig(t, "node-a"))
		sink, err := kube.NewStatusSink(kube.StatusSinkConfig{Client: a, RequestTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		m := status.New(status.Config{Sink: sink, RetryPeriod: 500 * time.Millisecond})
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- m.Run(mctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Manager.Run = %v", err)
			}
		}()
		created, err := admin.CoreV1().Pods("default").Create(ctx, apiPod("default", "outage", "", "node-a", 0), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodeSees(t, a, "default", "outage")

		s.StopAPIServer(t)
		stopped := time.Now()
		st := running("10.0.0.7")
		st.ContainerStatuses[0].Image = "busybox"
		m.SetPodStatus(sourced(created), st)
		// The outage lasts a few failed lease renewals and status writes.
		time.Sleep(3 * time.Second)
		if sink.Patched() != 0 {
			t.Fatalf("patched %d statuses with the API server stopped", sink.Patched())
		}
		s.StartAPIServer(t)
		t.Logf("API server away for %v", time.Since(stopped).Round(time.Millisecond))

		eventually(t, 30*time.Second, "the status written during the outage reaches the API server", func() (bool, string) {
			p, err := admin.CoreV1().Pods("default").Get(ctx, "outage", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == v1.PodRunning && p.Status.PodIP == "10.0.0.7", fmt.Sprintf("%+v", p.Status)
		})
		restarted := time.Now()
		eventually(t, 30*time.Second, "node-a's lease renewed after the restart", func() (bool, string) {
			l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node-a", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			// renewTime has microsecond precision; allow for that.
			return l.Spec.RenewTime.Time.After(restarted.Add(-time.Millisecond)), fmt.Sprintf("renewTime %v, restarted %v", l.Spec.RenewTime, restarted)
		})
	})
}

func conditionOf(node *v1.Node, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}
