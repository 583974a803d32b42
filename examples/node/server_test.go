package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/server"
)

// A KubeletConfiguration with a client CA makes the node server HTTPS
// with a self-signed certificate for the node's names, client
// certificates of that CA, bearer tokens checked by TokenReviews and
// requests authorized by SubjectAccessReviews (authorization mode
// Webhook); without one it stays plain HTTP.
func TestServingSettings(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	writeFile(t, ca, string(testCAPEM(t)))
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupsPerQOS: false
authentication: {x509: {clientCAFile: `+ca+`}, anonymous: {enabled: true}}
authorization: {mode: Webhook}
`)
	s, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	client := reviews()
	cfg, err := s.serving.agentServer("node-1", []string{"192.0.2.10"}, time.Now(), client)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil || cfg.Authenticator == nil || cfg.Authorizer == nil || cfg.Configz == nil {
		t.Fatalf("server settings %+v, want TLS, an authenticator, an authorizer and /configz", cfg)
	}
	leaf := cfg.TLS.Certificates[0].Leaf
	if err := leaf.VerifyHostname("node-1"); err != nil {
		t.Errorf("the self-signed certificate: %v", err)
	}
	if err := leaf.VerifyHostname("192.0.2.10"); err != nil {
		t.Errorf("the self-signed certificate: %v", err)
	}
	u, ok, err := cfg.Authenticator.Authenticate(httptest.NewRequest("GET", "/pods", nil))
	if err != nil || !ok || u.Name != server.AnonymousUser {
		t.Fatalf("anonymous authentication: %v %v %v", u, ok, err)
	}
	if d, _, _ := cfg.Authorizer.Authorize(context.Background(), server.Attributes{User: u, Verb: "get", Resource: "nodes"}); d == server.DecisionAllow {
		t.Error("Webhook mode allowed system:anonymous, which the SubjectAccessReview denies")
	}
	if d, _, _ := cfg.Authorizer.Authorize(context.Background(), server.Attributes{User: &server.User{Name: "kube-apiserver-kubelet-client"}, Verb: "get", Resource: "nodes"}); d != server.DecisionAllow {
		t.Error("Webhook mode refused a client the SubjectAccessReview allows")
	}
	// Bearer tokens are checked by a TokenReview (authentication.webhook
	// is on by default).
	req := httptest.NewRequest("GET", "/pods", nil)
	req.Header.Set("Authorization", "Bearer good")
	if u, ok, err := cfg.Authenticator.Authenticate(req); err != nil || !ok || u.Name != "kube-apiserver-kubelet-client" {
		t.Errorf("bearer token: %v %v %v; want the TokenReview's user", u, ok, err)
	}
	if got := len(client.Actions()); got != 3 {
		t.Errorf("%d reviews asked, want 3 (two SubjectAccessReviews, one TokenReview)", got)
	}

	writeFile(t, path, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupsPerQOS: false
authentication: {x509: {clientCAFile: `+ca+`}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
`)
	if s, err = loadConfig(path); err != nil {
		t.Fatal(err)
	}
	client = reviews()
	if cfg, err = s.serving.agentServer("node-1", nil, time.Now(), client); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := cfg.Authenticator.Authenticate(req); ok || cfg.Authorizer != nil || len(client.Actions()) != 0 {
		t.Errorf("webhook off, AlwaysAllow: token accepted %v, authorizer %v, %d reviews; want none", ok, cfg.Authorizer, len(client.Actions()))
	}

	plain, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	// Without a config but with the node's client the server is the
	// kubelet's by default: HTTPS with a self-signed certificate, tokens
	// and authorization through the API server; without a client it is
	// plain HTTP.
	if cfg, err := plain.serving.agentServer("node-1", nil, time.Now(), reviews()); err != nil || cfg.TLS == nil || cfg.Authenticator == nil || cfg.Authorizer == nil {
		t.Errorf("without a config, with a client: %+v, %v; want HTTPS with webhook authentication and authorization", cfg, err)
	}
	if cfg, err := plain.serving.agentServer("node-1", nil, time.Now(), nil); err != nil || cfg.TLS != nil || cfg.Authenticator != nil {
		t.Errorf("without a config nor a client: %+v, %v; want plain HTTP", cfg, err)
	}
	for name, doc := range map[string]string{
		"cert without key": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntlsCertFile: /x.crt\n",
		"unknown mode":     "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthorization: {mode: RBAC}\n",
	} {
		p := filepath.Join(dir, "bad.yaml")
		writeFile(t, p, doc)
		if _, err := loadConfig(p); err == nil {
			t.Errorf("%s: loadConfig accepted it", name)
		}
	}
}

// reviews is a clientset whose API server authenticates token "good" as
// kube-apiserver-kubelet-client and allows that user everything.
func reviews() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if r.Spec.Token == "good" {
			r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "kube-apiserver-kubelet-client"}}
		}
		return true, r, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		r.Status.Allowed = r.Spec.User == "kube-apiserver-kubelet-client"
		return true, r, nil
	})
	return c
}

func testCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
