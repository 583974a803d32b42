package kube_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kube"
	nkruntime "github.com/nodekit/nodekit/runtime"
)

func countActions(c *fake.Clientset, verb, res string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == res {
			n++
		}
	}
	return n
}

// TestObjects checks that the first Get reads the object and starts a
// watch of it, that later Gets answer from the watch and see changes
// without a read, that a missing object wraps runtime.ErrNotFound, and
// that the watch stops after TTL unused.
func TestObjects(t *testing.T) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"}, Data: map[string][]byte{"p": []byte("x")}}
	client := fake.NewClientset(cm, sec)
	clk := clocktesting.NewFakeClock(t0)
	o, err := kube.NewObjects(kube.ObjectsConfig{Client: client, TTL: time.Minute, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Before Run: a read every time, no watch.
	if got, err := o.GetConfigMap(ctx, "default", "cfg"); err != nil || got.Data["k"] != "v1" {
		t.Fatalf("GetConfigMap before Run = %v, %v", got, err)
	}
	if o.Watched() != 0 || countActions(client, "watch", "configmaps") != 0 {
		t.Fatal("a watch started before Run")
	}

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- o.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for o.Watched() == 0 {
		if _, err := o.GetConfigMap(ctx, "default", "cfg"); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("Get after Run started no watch")
		}
		time.Sleep(time.Millisecond)
	}
	// The watch syncs: from then on a Get makes no read.
	for {
		before := countActions(client, "get", "configmaps")
		if _, err := o.GetConfigMap(ctx, "default", "cfg"); err != nil {
			t.Fatal(err)
		}
		if countActions(client, "get", "configmaps") == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch of the configMap never synced: every Get still reads")
		}
		time.Sleep(time.Millisecond)
	}
	// Once the watch has synced, Gets make no request and see changes.
	gets := countActions(client, "get", "configmaps")
	cm2 := cm.DeepCopy()
	cm2.Data["k"] = "v2"
	if _, err := client.CoreV1().ConfigMaps("default").Update(ctx, cm2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := o.GetConfigMap(ctx, "default", "cfg")
		if err != nil {
			t.Fatal(err)
		}
		if got.Data["k"] == "v2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the change never showed: %v", got.Data)
		}
		time.Sleep(time.Millisecond)
	}
	for range 10 {
		if _, err := o.GetConfigMap(ctx, "default", "cfg"); err != nil {
			t.Fatal(err)
		}
	}
	if n := countActions(client, "get", "configmaps") - gets; n != 0 {
		t.Fatalf("%d reads for Gets of a watched configMap; want none", n)
	}
	if lists := countActions(client, "list", "configmaps"); lists != 1 {
		t.Fatalf("%d lists of configmaps; want 1", lists)
	}

	// A secret; a missing object.
	if got, err := o.GetSecret(ctx, "default", "s"); err != nil || string(got.Data["p"]) != "x" {
		t.Fatalf("GetSecret = %v, %v", got, err)
	}
	if _, err := o.GetSecret(ctx, "default", "missing"); !errors.Is(err, nkruntime.ErrNotFound) {
		t.Fatalf("missing secret: %v; want runtime.ErrNotFound", err)
	}
	for o.Watched() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d watches, want 3", o.Watched())
		}
		time.Sleep(time.Millisecond)
	}

	// Unused for a minute, the watches stop; used, one stays.
	clk.Step(30 * time.Second)
	if _, err := o.GetConfigMap(ctx, "default", "cfg"); err != nil {
		t.Fatal(err)
	}
	clk.Step(30 * time.Second)
	for o.Watched() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d watches after the TTL; want 1 (the configMap used 30s ago)", o.Watched())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestObjectsForbidden checks that a refusal is returned as the API
// server's error.
func TestObjectsForbidden(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("no relationship"))
	})
	o, err := kube.NewObjects(kube.ObjectsConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.GetSecret(context.Background(), "default", "s"); !apierrors.IsForbidden(err) || errors.Is(err, nkruntime.ErrNotFound) {
		t.Fatalf("err = %v; want Forbidden", err)
	}
}

// TestObjectsRefusedThenAllowed checks that a refusal is not kept: a
// node asks for a pod's configMap before the Node authorizer knows the
// pod is bound to it, gets Forbidden (and the reflector's list too), and
// the next Get once it is allowed returns the object.
func TestObjectsRefusedThenAllowed(t *testing.T) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cfg"}, Data: map[string]string{"data-1": "value-1"}}
	client := fake.NewClientset(cm)
	var allowed atomic.Bool
	refuse := func(k8stesting.Action) (bool, runtime.Object, error) {
		if allowed.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cfg", errors.New("no relationship found between node and this object"))
	}
	client.PrependReactor("get", "configmaps", refuse)
	client.PrependReactor("list", "configmaps", refuse)
	// The fake clock holds the reflector in its back-off after the
	// refused list: the Gets below are answered by reads.
	o, err := kube.NewObjects(kube.ObjectsConfig{Client: client, Clock: clocktesting.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	for i := range 2 {
		if _, err := o.GetConfigMap(ctx, "default", "cfg"); !apierrors.IsForbidden(err) || errors.Is(err, nkruntime.ErrNotFound) {
			t.Fatalf("Get %d while refused: %v; want Forbidden, not NotFound", i, err)
		}
	}
	allowed.Store(true)
	got, err := o.GetConfigMap(ctx, "default", "cfg")
	if err != nil || got.Data["data-1"] != "value-1" {
		t.Fatalf("Get once allowed = %v, %v; want the configMap", got, err)
	}
}

// TestTokens checks that a token is requested with the TokenRequest API,
// given again while fresh and requested anew after 80% of its life.
func TestTokens(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	n := 0
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		n++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		tr.Status = authenticationv1.TokenRequestStatus{Token: "tok-" + string(rune('0'+n)), ExpirationTimestamp: metav1.NewTime(clk.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
		return true, tr, nil
	})
	tok, err := kube.NewTokens(kube.TokensConfig{Client: client, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	exp := int64(1000)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{"api"}, ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: "u1"},
	}}
	ctx := context.Background()
	get := func() string {
		t.Helper()
		tr, err := tok.GetServiceAccountToken(ctx, "default", "sa", req)
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	if got := get(); got != "tok-1" {
		t.Fatalf("first token %q", got)
	}
	clk.Step(799 * time.Second)
	if got := get(); got != "tok-1" {
		t.Fatalf("token at 79.9%% of its life: %q; want the cached tok-1", got)
	}
	clk.Step(time.Second)
	if got := get(); got != "tok-2" {
		t.Fatalf("token at 80%% of its life: %q; want a new one", got)
	}
	other := req.DeepCopy()
	other.Spec.BoundObjectRef.UID = "u2"
	if tr, err := tok.GetServiceAccountToken(ctx, "default", "sa", other); err != nil || tr.Status.Token != "tok-3" {
		t.Fatalf("token for another pod: %v, %v; want a new one", tr, err)
	}
}
