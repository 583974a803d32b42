package kube_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/kube/internal/apiservertest"
	nkruntime "github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
)

var authT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// authWait bounds each wait of the tests for a goroutine, in real time.
const authWait = 10 * time.Second

// reviewer answers the TokenReviews and SubjectAccessReviews of a fake
// clientset and records their specs.
type reviewer struct {
	mu     sync.Mutex
	tokens map[string]authenticationv1.TokenReviewStatus
	allow  func(authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus
	err    error
	fail   []error // the errors of the next calls, before err

	tokenSpecs []authenticationv1.TokenReviewSpec
	sarSpecs   []authorizationv1.SubjectAccessReviewSpec
}

func (r *reviewer) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		in := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.tokenSpecs = append(r.tokenSpecs, in.Spec)
		if err := r.nextErr(); err != nil {
			return true, nil, err
		}
		out := in.DeepCopy()
		out.Status = r.tokens[in.Spec.Token]
		return true, out, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		in := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.sarSpecs = append(r.sarSpecs, in.Spec)
		if err := r.nextErr(); err != nil {
			return true, nil, err
		}
		out := in.DeepCopy()
		out.Status = r.allow(in.Spec)
		return true, out, nil
	})
	return c
}

// nextErr is the error of a call; r.mu is held.
func (r *reviewer) nextErr() error {
	if len(r.fail) > 0 {
		err := r.fail[0]
		r.fail = r.fail[1:]
		return err
	}
	return r.err
}

func (r *reviewer) calls() (tokens, sars int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.tokenSpecs), len(r.sarSpecs)
}

func (r *reviewer) setErr(err error) { r.mu.Lock(); r.err = err; r.mu.Unlock() }

var aliceStatus = authenticationv1.TokenReviewStatus{
	Authenticated: true,
	User: authenticationv1.UserInfo{Username: "alice", UID: "uid-a", Groups: []string{"devs"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"view"}}},
}

// A valid token is reviewed once and its user kept for CacheTTL (2m by
// default): a second request in that time asks nothing, one after it asks
// again. A token the API server does not authenticate is kept as long; a
// review with an error text (an invalid token) and a failed review are
// not kept, and both are errors (401 at the server).
func TestTokenReviewAuthenticator(t *testing.T) {
	r := &reviewer{tokens: map[string]authenticationv1.TokenReviewStatus{
		"good":    aliceStatus,
		"unknown": {Authenticated: false},
		"invalid": {Authenticated: false, Error: "invalid bearer token"},
	}}
	clk := clocktesting.NewFakeClock(authT0)
	a, err := kube.NewTokenReviewAuthenticator(kube.TokenReviewConfig{Client: r.client(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := &server.User{Name: "alice", UID: "uid-a", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"view"}}}

	u, ok, err := a.AuthenticateToken(ctx, "good")
	if err != nil || !ok || !cmp.Equal(u, want) {
		t.Fatalf("good token: %+v %v %v; want %+v", u, ok, err, want)
	}
	if diff := cmp.Diff([]authenticationv1.TokenReviewSpec{{Token: "good"}}, r.tokenSpecs); diff != "" {
		t.Errorf("review spec (-want +got):\n%s", diff)
	}
	u.Groups[0] = "mutated" // the caller's copy
	clk.SetTime(authT0.Add(2*time.Minute - time.Second))
	u, ok, err = a.AuthenticateToken(ctx, "good")
	if err != nil || !ok || !cmp.Equal(u, want) {
		t.Fatalf("good token from the cache: %+v %v %v; want %+v", u, ok, err, want)
	}
	if n, _ := r.calls(); n != 1 {
		t.Errorf("%d reviews within the cache TTL, want 1", n)
	}
	clk.SetTime(authT0.Add(2 * time.Minute))
	if _, ok, err := a.AuthenticateToken(ctx, "good"); !ok || err != nil {
		t.Fatalf("good token after the TTL: %v %v", ok, err)
	}
	if n, _ := r.calls(); n != 2 {
		t.Errorf("%d reviews after the cache TTL, want 2", n)
	}

	for i := 0; i < 2; i++ {
		if u, ok, err := a.AuthenticateToken(ctx, "unknown"); ok || err != nil || u != nil {
			t.Errorf("unknown token: %v %v %v; want not authenticated, no error", u, ok, err)
		}
	}
	if n, _ := r.calls(); n != 3 {
		t.Errorf("%d reviews, want 3: an unauthenticated answer is kept", n)
	}
	for i := 0; i < 2; i++ {
		if _, ok, err := a.AuthenticateToken(ctx, "invalid"); ok || err == nil {
			t.Errorf("invalid token: %v %v; want an error", ok, err)
		}
	}
	if n, _ := r.calls(); n != 5 {
		t.Errorf("%d reviews, want 5: an answer with an error is not kept", n)
	}
	r.setErr(errors.New("connection refused"))
	for i := 0; i < 2; i++ {
		if _, ok, err := a.AuthenticateToken(ctx, "other"); ok || err == nil {
			t.Errorf("failed review: %v %v; want an error", ok, err)
		}
	}
	if n, _ := r.calls(); n != 7 {
		t.Errorf("%d reviews, want 7: a failed review is not kept", n)
	}
	// The cached answer still serves while the API server is away.
	if _, ok, err := a.AuthenticateToken(ctx, "good"); !ok || err != nil {
		t.Errorf("cached good token while the API server fails: %v %v", ok, err)
	}
}

// A review that fails with a transient error (the API server's internal
// error, a timeout, too many requests) is retried as the kubelet retries
// it: after 0.5s, then 0.75s, 1.125s and 1.6875s on the clock, five calls
// in all; one refused for good (403) is not retried.
func TestReviewRetries(t *testing.T) {
	internal := apierrors.NewInternalError(errors.New("etcd timeout"))
	r := &reviewer{
		tokens: map[string]authenticationv1.TokenReviewStatus{"good": aliceStatus},
		allow: func(authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
			return authorizationv1.SubjectAccessReviewStatus{Allowed: true}
		},
	}
	clk := clocktesting.NewFakeClock(authT0)
	client := r.client()
	a, err := kube.NewTokenReviewAuthenticator(kube.TokenReviewConfig{Client: client, Clock: clk, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	z, err := kube.NewSubjectAccessReviewAuthorizer(kube.SubjectAccessReviewConfig{Client: client, Clock: clk, AuthorizedTTL: -1, UnauthorizedTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	// call runs review in a goroutine, steps the clock through the
	// waits, and returns its error once it returned.
	call := func(review func() error, waits ...time.Duration) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- review() }()
		for _, w := range waits {
			deadline := time.Now().Add(authWait)
			for !clk.HasWaiters() {
				select {
				case err := <-done:
					t.Fatalf("the review returned (%v) before waiting %v", err, w)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("the review does not wait %v", w)
				}
				time.Sleep(time.Millisecond)
			}
			clk.Step(w - time.Nanosecond)
			select {
			case err := <-done:
				t.Fatalf("the review returned (%v) before its wait of %v", err, w)
			default:
			}
			clk.Step(time.Nanosecond)
		}
		select {
		case err := <-done:
			return err
		case <-time.After(authWait):
			t.Fatal("the review did not return after its waits")
			return nil
		}
	}
	token := func() error {
		_, ok, err := a.AuthenticateToken(context.Background(), "good")
		if err == nil && !ok {
			err = errors.New("not authenticated")
		}
		return err
	}
	sar := func() error {
		d, _, err := z.Authorize(context.Background(), server.Attributes{User: &server.User{Name: "alice"}, Verb: "get", Resource: "nodes", Subresource: "proxy"})
		if err == nil && d != server.DecisionAllow {
			err = errors.New("not allowed")
		}
		return err
	}

	r.fail = []error{internal, apierrors.NewTooManyRequests("slow down", 0)}
	if err := call(token, 500*time.Millisecond, 750*time.Millisecond); err != nil {
		t.Errorf("token review after two transient errors: %v", err)
	}
	if n, _ := r.calls(); n != 3 {
		t.Errorf("%d token reviews, want 3", n)
	}
	r.fail = []error{apierrors.NewTimeoutError("slow", 1)}
	if err := call(sar, 500*time.Millisecond); err != nil {
		t.Errorf("subject access review after a timeout: %v", err)
	}
	if _, n := r.calls(); n != 2 {
		t.Errorf("%d subject access reviews, want 2", n)
	}
	r.fail = []error{internal, internal, internal, internal, internal}
	if err := call(token, 500*time.Millisecond, 750*time.Millisecond, 1125*time.Millisecond, 1687500*time.Microsecond); !apierrors.IsInternalError(err) {
		t.Errorf("token review failing five times: %v, want the internal error", err)
	}
	if n, _ := r.calls(); n != 8 {
		t.Errorf("%d token reviews, want 8: five calls for the failing one", n)
	}
	r.fail = []error{apierrors.NewForbidden(authorizationv1.Resource("subjectaccessreviews"), "", errors.New("no"))}
	if err := call(sar); !apierrors.IsForbidden(err) {
		t.Errorf("forbidden review: %v, want the 403 at once", err)
	}
	if _, n := r.calls(); n != 3 {
		t.Errorf("%d subject access reviews, want 3: a 403 is not retried", n)
	}
}

// With audiences, they are sent in the review, and a token the API server
// finds valid for none of them is not authenticated.
func TestTokenReviewAuthenticatorAudiences(t *testing.T) {
	inAud := aliceStatus
	inAud.Audiences = []string{"other", "kubelet"}
	r := &reviewer{tokens: map[string]authenticationv1.TokenReviewStatus{"in": inAud, "out": aliceStatus}}
	a, err := kube.NewTokenReviewAuthenticator(kube.TokenReviewConfig{Client: r.client(), Audiences: []string{"kubelet"}, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	if u, ok, err := a.AuthenticateToken(context.Background(), "in"); !ok || err != nil || u.Name != "alice" {
		t.Errorf("token of the audience: %v %v %v", u, ok, err)
	}
	if u, ok, err := a.AuthenticateToken(context.Background(), "out"); ok || err != nil {
		t.Errorf("token of no audience: %v %v %v; want not authenticated", u, ok, err)
	}
	if _, ok, _ := a.AuthenticateToken(context.Background(), "in"); !ok {
		t.Error("token of the audience, again: not authenticated")
	}
	if len(r.tokenSpecs) != 3 || !cmp.Equal(r.tokenSpecs[0].Audiences, []string{"kubelet"}) {
		t.Errorf("reviews %+v, want 3 (a negative CacheTTL keeps nothing) with audiences [kubelet]", r.tokenSpecs)
	}
	if _, err := kube.NewTokenReviewAuthenticator(kube.TokenReviewConfig{}); err == nil {
		t.Error("NewTokenReviewAuthenticator accepted a config without Client")
	}
}

// The review carries the user, groups, extra and UID the server found and
// the kubelet's attributes; an allowed answer is kept 5m, a denied or
// no-opinion one 30s; a failed review is an error (500 at the server) and
// is not kept.
func TestSubjectAccessReviewAuthorizer(t *testing.T) {
	r := &reviewer{allow: func(s authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
		switch s.ResourceAttributes.Subresource {
		case "proxy":
			return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "bound"}
		case "stats":
			return authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "denied by policy"}
		}
		return authorizationv1.SubjectAccessReviewStatus{Reason: "no rule"}
	}}
	clk := clocktesting.NewFakeClock(authT0)
	z, err := kube.NewSubjectAccessReviewAuthorizer(kube.SubjectAccessReviewConfig{Client: r.client(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	user := &server.User{Name: "alice", UID: "uid-a", Groups: []string{"devs", server.AuthenticatedGroup}, Extra: map[string][]string{"scopes": {"view"}}}
	attrs := func(sub string) server.Attributes {
		return server.Attributes{User: user, Verb: "create", APIVersion: "v1", Resource: "nodes", Subresource: sub, Name: "node-1", Path: "/exec/ns/pod/c"}
	}
	check := func(sub string, wantD server.Decision, wantReason string, wantCalls int) {
		t.Helper()
		d, reason, err := z.Authorize(ctx, attrs(sub))
		if err != nil || d != wantD || reason != wantReason {
			t.Errorf("%s: %v %q %v; want %v %q", sub, d, reason, err, wantD, wantReason)
		}
		if _, n := r.calls(); n != wantCalls {
			t.Errorf("%s: %d reviews, want %d", sub, n, wantCalls)
		}
	}
	check("proxy", server.DecisionAllow, "bound", 1)
	want := authorizationv1.SubjectAccessReviewSpec{
		User: "alice", UID: "uid-a", Groups: []string{"devs", server.AuthenticatedGroup},
		Extra: map[string]authorizationv1.ExtraValue{"scopes": {"view"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "create", Version: "v1", Resource: "nodes", Subresource: "proxy", Name: "node-1"},
	}
	if diff := cmp.Diff(want, r.sarSpecs[0]); diff != "" {
		t.Errorf("review spec (-want +got):\n%s", diff)
	}
	check("stats", server.DecisionDeny, "denied by policy", 2)
	check("log", server.DecisionNoOpinion, "no rule", 3)

	clk.SetTime(authT0.Add(29 * time.Second))
	check("proxy", server.DecisionAllow, "bound", 3)
	check("stats", server.DecisionDeny, "denied by policy", 3)
	check("log", server.DecisionNoOpinion, "no rule", 3)
	clk.SetTime(authT0.Add(30 * time.Second))
	check("stats", server.DecisionDeny, "denied by policy", 4)
	check("log", server.DecisionNoOpinion, "no rule", 5)
	clk.SetTime(authT0.Add(5*time.Minute - time.Second))
	check("proxy", server.DecisionAllow, "bound", 5)
	clk.SetTime(authT0.Add(5 * time.Minute))
	check("proxy", server.DecisionAllow, "bound", 6)

	// Another user is another review.
	other := attrs("proxy")
	other.User = &server.User{Name: "bob"}
	if d, _, _ := z.Authorize(ctx, other); d != server.DecisionAllow {
		t.Errorf("bob: %v", d)
	}
	if _, n := r.calls(); n != 7 {
		t.Errorf("%d reviews, want 7: another user is not served from alice's answer", n)
	}

	r.setErr(errors.New("connection refused"))
	clk.SetTime(authT0.Add(time.Hour))
	for i := 0; i < 2; i++ {
		if d, _, err := z.Authorize(ctx, attrs("proxy")); err == nil || d == server.DecisionAllow {
			t.Errorf("failed review: %v %v; want an error and no allow", d, err)
		}
	}
	if _, n := r.calls(); n != 9 {
		t.Errorf("%d reviews, want 9: a failed review is not kept", n)
	}

	// Attributes without a resource are a non-resource review.
	r.setErr(nil)
	r.allow = func(s authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
		return authorizationv1.SubjectAccessReviewStatus{Allowed: s.NonResourceAttributes != nil && s.NonResourceAttributes.Path == "/healthz"}
	}
	if d, _, _ := z.Authorize(ctx, server.Attributes{User: user, Verb: "get", Path: "/healthz"}); d != server.DecisionAllow {
		t.Errorf("non-resource /healthz: %v", d)
	}
	if _, err := kube.NewSubjectAccessReviewAuthorizer(kube.SubjectAccessReviewConfig{}); err == nil {
		t.Error("NewSubjectAccessReviewAuthorizer accepted a config without Client")
	}
}

// The cache is bounded: past CacheSize it drops answers rather than grow.
func TestReviewCacheBounded(t *testing.T) {
	r := &reviewer{allow: func(authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true}
	}}
	z, err := kube.NewSubjectAccessReviewAuthorizer(kube.SubjectAccessReviewConfig{Client: r.client(), CacheSize: 2,
		Clock: clocktesting.NewFakeClock(authT0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c", "a", "b", "c"} {
		_, _, _ = z.Authorize(context.Background(), server.Attributes{User: &server.User{Name: name}, Verb: "get", Resource: "nodes", Subresource: "proxy"})
	}
	// Three users in a cache of two: at least one of the second round is
	// asked again, and never more than all three.
	if _, n := r.calls(); n < 4 || n > 6 {
		t.Errorf("%d reviews for 6 requests of 3 users in a cache of 2, want 4 to 6", n)
	}
}

// Through the node server: a token the API server authenticates and a
// review that allows is served; a review that denies is 403; an
// unauthenticated token 401; a failed review 500.
func TestReviewsThroughServer(t *testing.T) {
	r := &reviewer{
		tokens: map[string]authenticationv1.TokenReviewStatus{
			"alice": aliceStatus,
			"bob":   {Authenticated: true, User: authenticationv1.UserInfo{Username: "bob"}},
		},
		allow: func(s authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
			return authorizationv1.SubjectAccessReviewStatus{Allowed: s.User == "alice" && s.ResourceAttributes.Name == "node-1"}
		},
	}
	client := r.client()
	clk := clocktesting.NewFakeClock(authT0)
	tokens, err := kube.NewTokenReviewAuthenticator(kube.TokenReviewConfig{Client: client, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	authz, err := kube.NewSubjectAccessReviewAuthorizer(kube.SubjectAccessReviewConfig{Client: client, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	authn, err := server.NewAuthenticator(server.AuthenticatorConfig{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{NodeName: "node-1", Pods: noPods{}, Authenticator: authn, Authorizer: authz})
	if err != nil {
		t.Fatal(err)
	}
	get := func(token string) int {
		req := httptest.NewRequest(http.MethodGet, "/pods", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	for _, c := range []struct {
		token string
		want  int
	}{{"alice", 200}, {"bob", 403}, {"nobody", 401}} {
		if got := get(c.token); got != c.want {
			t.Errorf("GET /pods with token %s: %d, want %d", c.token, got, c.want)
		}
	}
	r.setErr(errors.New("connection refused"))
	clk.SetTime(authT0.Add(31 * time.Second)) // bob's denial expires, the rest is kept
	if got := get("alice"); got != 200 {
		t.Errorf("alice with her answers cached while the API server fails: %d, want 200", got)
	}
	if got := get("bob"); got != 500 {
		t.Errorf("bob (his denial expired) while the API server fails: %d, want 500", got)
	}
}

// logNode runs one pod whose container logs to a file: the server's
// PodLister and RuntimeReader.
type logNode struct {
	pod    *v1.Pod
	status *nkruntime.PodStatus
}

func (n logNode) Pods() []*v1.Pod { return []*v1.Pod{n.pod} }

func (n logNode) GetPods(context.Context, bool) ([]*nkruntime.Pod, error) { return nil, nil }

func (n logNode) GetPodStatus(context.Context, types.UID, string, string) (*nkruntime.PodStatus, error) {
	return n.status, nil
}

type noPods struct{}

func (noPods) Pods() []*v1.Pod { return nil }

// Against a real API server, with the node's own credentials for the
// reviews, and through the node server over TLS on loopback: a service
// account bound to a ClusterRole with nodes/proxy reads a container's log
// and /pods and passes authorization for /exec, but not /stats (another
// subresource); one without the binding is refused 403; a token the API
// server does not know is answered 401.
func TestReviewsAgainstAPIServer(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{Nodes: []string{"node-1"}})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(s.AdminConfig())
	node := kubernetes.NewForConfigOrDie(s.NodeConfig(t, "node-1"))

	const ns = "auth-test"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, sa := range []string{"reader", "stranger"} {
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tokens[sa] = tr.Status.Token
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-proxy"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get", "create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader-node-proxy"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-proxy"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC learns of the binding from its informers: wait (as admin, so
	// that no answer is cached) until it allows.
	readerName := "system:serviceaccount:" + ns + ":reader"
	eventually(t, 20*time.Second, "RBAC allows the reader nodes/proxy", func() (bool, string) {
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: readerName, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes", Subresource: "proxy", Name: "node-1"}}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, fmt.Sprint(sar, err)
	})

	authnReviews, err := kube.NewTokenReviewAuthenticator(kube.TokenReviewConfig{Client: node})
	if err != nil {
		t.Fatal(err)
	}
	authz, err := kube.NewSubjectAccessReviewAuthorizer(kube.SubjectAccessReviewConfig{Client: node})
	if err != nil {
		t.Fatal(err)
	}
	// The node's identity may create both reviews (the Node authorizer).
	u, ok, err := authnReviews.AuthenticateToken(ctx, tokens["reader"])
	if err != nil || !ok || u.Name != readerName || !slices.Contains(u.Groups, "system:serviceaccounts:"+ns) || u.UID == "" {
		t.Fatalf("TokenReview as the node: %+v %v %v; want %s with its groups and UID", u, ok, err, readerName)
	}
	if d, reason, err := authz.Authorize(ctx, server.Attributes{User: u, Verb: "get", APIVersion: "v1", Resource: "nodes", Subresource: "proxy", Name: "node-1"}); err != nil || d != server.DecisionAllow {
		t.Fatalf("SubjectAccessReview as the node: %v %q %v; want allowed", d, reason, err)
	}

	authn, err := server.NewAuthenticator(server.AuthenticatorConfig{Tokens: authnReviews})
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(logPath, []byte("2026-01-02T03:04:05Z stdout F hello from web\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	web := logNode{
		pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "uid-web"},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}},
		status: &nkruntime.PodStatus{ContainerStatuses: []*nkruntime.ContainerStatus{{
			ID: nkruntime.ContainerID{Type: "containerd", ID: "c1"}, Name: "app",
			State: nkruntime.ContainerStateRunning, LogPath: logPath,
		}}},
	}
	srv, err := server.New(server.Config{NodeName: "node-1", Pods: web, Runtime: web, Authenticator: authn, Authorizer: authz})
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := server.TLSConfig(server.TLSOptions{Hosts: []string{"127.0.0.1"}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, lis, tlsCfg) }()
	roots := x509.NewCertPool()
	roots.AddCert(tlsCfg.Certificates[0].Leaf)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer func() {
		tr.CloseIdleConnections()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	base := "https://" + lis.Addr().String()
	do := func(method, path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if got, body := do("GET", "/containerLogs/"+ns+"/web/app", tokens["reader"]); got != 200 || body != "hello from web" {
		t.Errorf("the reader's log request: %d %q, want 200 \"hello from web\"", got, body)
	}
	for _, c := range []struct {
		method, path, who string
		want              int
	}{
		{"GET", "/pods", "reader", 200},
		// Authorized through proxy; this server has no streaming runtime.
		{"POST", "/exec/" + ns + "/web/app?command=ls&output=1", "reader", 503},
		{"GET", "/containerLogs/" + ns + "/web/app", "stranger", 403},
		{"GET", "/stats/summary", "reader", 403},
		{"GET", "/pods", "stranger", 403},
		{"POST", "/exec/" + ns + "/web/app?command=ls&output=1", "stranger", 403},
		{"GET", "/pods", "not-a-token", 401},
	} {
		token := tokens[c.who]
		if token == "" {
			token = c.who
		}
		if got, body := do(c.method, c.path, token); got != c.want {
			t.Errorf("%s %s as %s: %d %q, want %d", c.method, c.path, c.who, got, body, c.want)
		}
	}
}

// The node server asks the API server whether a user may exec in the
// node's pods (nodes/proxy). Here the API server is client-go's fake
// clientset answering as RBAC would for a user bound to nodes/proxy.
func ExampleSubjectAccessReviewAuthorizer() {
	client := fake.NewClientset()
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		r.Status.Allowed = r.Spec.User == "alice" && r.Spec.ResourceAttributes.Subresource == "proxy"
		return true, r, nil
	})
	authz, err := kube.NewSubjectAccessReviewAuthorizer(kube.SubjectAccessReviewConfig{Client: client})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, sub := range []string{"proxy", "stats"} {
		d, _, err := authz.Authorize(context.Background(), server.Attributes{
			User: &server.User{Name: "alice"}, Verb: "create", APIVersion: "v1",
			Resource: "nodes", Subresource: sub, Name: "node-1",
		})
		fmt.Println(sub, d == server.DecisionAllow, err)
	}
	// Output:
	// proxy true <nil>
	// stats false <nil>
}
