package kube

import (
	"context"
	"fmt"
	"math"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaseLoop renews the Lease now and then every LeaseRenewInterval until
// ctx ends. After a failure it retries sooner, 200ms at first and doubling
// up to 7s (or the renew interval if shorter), so a slow or absent API
// server gets few requests and a returning one sees the node at once.
func (n *Node) leaseLoop(ctx context.Context) {
	limit := min(maxBackoff, n.cfg.LeaseRenewInterval)
	backoff := min(leaseBackoffInitial, limit)
	for {
		delay := n.cfg.LeaseRenewInterval
		if err := n.renewLease(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			n.log.Error(err, "cannot renew the node lease; retrying", "after", backoff)
			delay = backoff
			backoff = min(2*backoff, limit)
		} else {
			backoff = min(leaseBackoffInitial, limit)
		}
		if !n.wait(ctx, delay) {
			return
		}
	}
}

// renewLease writes the Lease once: an update of the last one written if
// there is one, else a read and an update, or a create when it does not
// exist.
func (n *Node) renewLease(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	leases := n.client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	if n.lease != nil {
		l, err := leases.Update(ctx, n.desiredLease(n.lease), metav1.UpdateOptions{})
		if err == nil {
			n.lease = l
			return nil
		}
		n.lease = nil
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: renew lease %s: %w", n.cfg.Name, err)
		}
	}
	cur, err := leases.Get(ctx, n.cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l, err := leases.Create(ctx, n.desiredLease(nil), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("kube: create lease %s: %w", n.cfg.Name, err)
		}
		n.lease = l
		return nil
	case err != nil:
		return fmt.Errorf("kube: get lease %s: %w", n.cfg.Name, err)
	}
	l, err := leases.Update(ctx, n.desiredLease(cur), metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("kube: renew lease %s: %w", n.cfg.Name, err)
	}
	n.lease = l
	return nil
}

// desiredLease is base (or a new Lease) held by this node, renewed now,
// owned by the Node object once its UID is known.
func (n *Node) desiredLease(base *coordinationv1.Lease) *coordinationv1.Lease {
	var l *coordinationv1.Lease
	if base == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Namespace: v1.NamespaceNodeLease}}
	} else {
		l = base.DeepCopy()
	}
	holder := n.cfg.Name
	secs := int32(min(math.Ceil(n.cfg.LeaseDuration.Seconds()), math.MaxInt32))
	now := metav1.NewMicroTime(n.clock.Now())
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &now
	if uid := n.nodeUID(); uid != "" {
		l.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1",
			Kind:       "Node",
			Name:       n.cfg.Name,
			UID:        uid,
		}}
	}
	return l
}
