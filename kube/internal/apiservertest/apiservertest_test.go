package apiservertest_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/kube/internal/apiservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStart starts the real control plane and checks the identities it
// hands out: the admin is in system:masters, a node token is
// system:node:NAME in system:nodes and the Node authorizer confines it.
func TestStart(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{Nodes: []string{"a", "b"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	admin := kubernetes.NewForConfigOrDie(s.AdminConfig())
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Fatalf("admin get namespace kube-system: %v", err)
	}

	node := kubernetes.NewForConfigOrDie(s.NodeConfig(t, "a"))
	rev, err := node.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node self subject review: %v", err)
	}
	if u := rev.Status.UserInfo; u.Username != "system:node:a" || !contains(u.Groups, "system:nodes") {
		t.Fatalf("node token authenticates as %q %v; want system:node:a in system:nodes", u.Username, u.Groups)
	}
	// NodeRestriction: a node may create its own Node object but not another's.
	if _, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node a creates Node a: %v", err)
	}
	_, err = node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("node a creates Node b: err = %v; want Forbidden", err)
	}
	if _, err := node.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node a lists secrets: err = %v; want Forbidden", err)
	}

	// The API server comes back on the same address with the same state.
	s.StopAPIServer(t)
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server still answers after StopAPIServer")
	}
	s.StartAPIServer(t)
	if _, err := node.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("node a after the restart: %v", err)
	}

	// Stop takes the control plane away; the cleanup's second stop is a no-op.
	s.Stop(t)
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server still answers after Stop")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
