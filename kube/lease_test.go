package kube

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func getLease(t *testing.T, f *fixture) *coordinationv1.Lease {
	t.Helper()
	l, err := f.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLeaseCreateAndRenew checks the Lease's fields, its owner, and that a
// renewal updates the last Lease written without reading it again.
func TestLeaseCreateAndRenew(t *testing.T) {
	f := newFixture()
	n := f.node(t)
	ctx := context.Background()
	if err := n.register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.renewLease(ctx); err != nil {
		t.Fatal(err)
	}
	l := getLease(t, f)
	if *l.Spec.HolderIdentity != "n1" || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(t0) {
		t.Fatalf("lease spec = %+v; want holder n1, 40s, renewed at t0", l.Spec)
	}
	uid := getNode(t, f).UID
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].Name != "n1" || l.OwnerReferences[0].UID != uid {
		t.Fatalf("lease owners = %+v; want the Node n1 (uid %s)", l.OwnerReferences, uid)
	}

	f.client.ClearActions()
	f.clock.Step(10 * time.Second)
	if err := n.renewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getLease(t, f).Spec.RenewTime.Time; !got.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("renewTime = %v, want t0+10s", got)
	}
	if f.count("get", "leases", "") != 1 || f.count("update", "leases", "") != 1 {
		t.Fatalf("a renewal made %v; want one update (and the test's get)", f.client.Actions())
	}
}

// TestLeaseConflict checks that a Lease changed by someone else is read
// again and renewed, and that a Lease deleted is created again.
func TestLeaseConflict(t *testing.T) {
	f := newFixture()
	n := f.node(t)
	ctx := context.Background()
	if err := n.renewLease(ctx); err != nil {
		t.Fatal(err)
	}
	f.failN("update", "leases", 1, apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, "n1", errBoom))
	f.clock.Step(10 * time.Second)
	if err := n.renewLease(ctx); err != nil {
		t.Fatalf("renewal after a conflict = %v; want it to re-read and update", err)
	}
	if got := getLease(t, f).Spec.RenewTime.Time; !got.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("renewTime = %v, want t0+10s", got)
	}

	if err := f.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(10 * time.Second)
	if err := n.renewLease(ctx); err != nil {
		t.Fatalf("renewal of a deleted lease = %v; want it created again", err)
	}
	if got := getLease(t, f).Spec.RenewTime.Time; !got.Equal(t0.Add(20 * time.Second)) {
		t.Fatalf("renewTime = %v, want t0+20s", got)
	}
}

// TestLeaseDurationConfigurable checks that LeaseDuration reaches the
// Lease in whole seconds.
func TestLeaseDurationConfigurable(t *testing.T) {
	f := newFixture()
	f.cfg.LeaseDuration = 90 * time.Second
	f.cfg.LeaseRenewInterval = 20 * time.Second
	if err := f.node(t).renewLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := *getLease(t, f).Spec.LeaseDurationSeconds; got != 90 {
		t.Fatalf("leaseDurationSeconds = %d, want 90", got)
	}
}
