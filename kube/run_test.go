package kube

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunBackoff drives Run on the fake clock: registration is retried
// after 100ms and then 200ms; once registered the Lease is renewed every
// 10s and the status synced every NodeStatusUpdateFrequency; a failed
// renewal is retried after 200ms, then 400ms; Run returns when ctx ends.
func TestRunBackoff(t *testing.T) {
	f := newFixture()
	f.cfg.NodeStatusUpdateFrequency = time.Minute
	creates := notify(f.client, "create", "nodes")
	f.failN("create", "nodes", 2, apierrors.NewServiceUnavailable("down"))
	leaseWrites := notify(f.client, "update", "leases")
	leaseCreates := notify(f.client, "create", "leases")
	statusGets := notify(f.client, "get", "nodes")
	n := f.node(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		case <-time.After(realWait):
			t.Error("Run did not return after ctx ended")
		}
	}()

	expect(t, creates, "the first registration")
	waitForWaiters(t, f.clock, 1, "the registration back-off")
	f.clock.Step(100 * time.Millisecond)
	expect(t, creates, "the registration after 100ms")
	waitForWaiters(t, f.clock, 1, "the second registration back-off")
	f.clock.Step(199 * time.Millisecond)
	expectNone(t, creates, "registration before 200ms")
	f.clock.Step(time.Millisecond)
	expect(t, creates, "the registration after 200ms")
	select {
	case <-n.Registered():
	case <-time.After(realWait):
		t.Fatal("Registered not closed after the node was created")
	}
	expect(t, leaseCreates, "the lease creation")
	expect(t, statusGets, "the first status sync")
	waitForWaiters(t, f.clock, 2, "the lease and status periods")

	f.clock.Step(10 * time.Second)
	expect(t, leaseWrites, "the renewal after 10s")
	waitForWaiters(t, f.clock, 2, "the next renewal")
	expectNone(t, statusGets, "a status sync before its period")

	f.failN("update", "leases", 1, apierrors.NewServiceUnavailable("down"))
	f.failN("get", "leases", 1, apierrors.NewServiceUnavailable("down"))
	f.clock.Step(10 * time.Second)
	expect(t, leaseWrites, "the failing renewal")
	waitForWaiters(t, f.clock, 2, "the lease back-off")
	f.clock.Step(200 * time.Millisecond)
	waitForWaiters(t, f.clock, 2, "the second lease back-off")
	f.clock.Step(399 * time.Millisecond)
	expectNone(t, leaseWrites, "a renewal before 400ms")
	f.clock.Step(time.Millisecond)
	expect(t, leaseWrites, "the renewal after the back-off")
	waitForWaiters(t, f.clock, 2, "the renew period after a success")
	if got := getLease(t, f).Spec.RenewTime.Time; !got.Equal(f.clock.Now()) {
		t.Fatalf("renewTime = %v, want %v", got, f.clock.Now())
	}

	f.clock.Step(40 * time.Second)
	expect(t, statusGets, "the status sync after a minute")
}
