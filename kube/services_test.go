package kube

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func service(ns, name, ip string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{ClusterIP: ip, Ports: []v1.ServicePort{{Port: 80}}}}
}

// serviceNames polls ListServices (bounded in real time) until it returns
// want, and fails the test otherwise.
func waitServices(t *testing.T, s *Services, ns string, want []string) {
	t.Helper()
	deadline := time.Now().Add(realWait)
	var got []string
	for time.Now().Before(deadline) {
		list, err := s.ListServices(context.Background(), ns)
		got = nil
		for _, svc := range list {
			got = append(got, svc.Name)
		}
		slices.Sort(got)
		if err == nil && slices.Equal(got, want) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("services of %q: %v, want %v", ns, got, want)
}

func TestServicesListsByNamespaceAndFollowsChanges(t *testing.T) {
	client := fake.NewClientset(
		service("default", "kubernetes", "10.0.0.1"),
		service("ns", "web", "10.0.0.2"),
		service("ns", "db", v1.ClusterIPNone),
		service("other", "x", "10.0.0.3"),
	)
	s, err := NewServices(ServicesConfig{Client: client, Clock: clocktesting.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListServices(context.Background(), "ns"); !errors.Is(err, ErrServicesNotSynced) {
		t.Fatalf("ListServices before Run: %v, want ErrServicesNotSynced", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(realWait):
			t.Error("Run did not return after its context ended")
		}
	}()

	waitServices(t, s, "ns", []string{"db", "web"})
	waitServices(t, s, "default", []string{"kubernetes"})
	waitServices(t, s, "empty", nil)
	if !s.HasSynced() {
		t.Error("HasSynced false after the first list")
	}

	if _, err := client.CoreV1().Services("ns").Create(ctx, service("ns", "cache", "10.0.0.4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Services("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServices(t, s, "ns", []string{"cache", "db"})
	if err := s.Run(ctx); err == nil {
		t.Error("a second Run returned nil, want an error")
	}
}

func TestNewServicesNeedsAClient(t *testing.T) {
	if _, err := NewServices(ServicesConfig{}); err == nil {
		t.Error("NewServices without a client: nil error")
	}
}
