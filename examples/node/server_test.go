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

	"github.com/nodekit/nodekit/server"
)

// A KubeletConfiguration with a client CA makes the node server HTTPS
// with a self-signed certificate for the node's names, client
// certificates of that CA, and anonymous requests refused; without one
// it stays plain HTTP.
func TestServingSettings(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	writeFile(t, ca, string(testCAPEM(t)))
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {x509: {clientCAFile: `+ca+`}, anonymous: {enabled: true}}
authorization: {mode: Webhook}
`)
	s, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.serving.agentServer("node-1", []string{"192.0.2.10"}, time.Now())
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
	if d, _, _ := cfg.Authorizer.Authorize(context.Background(), server.Attributes{User: u, Verb: "get"}); d == server.DecisionAllow {
		t.Error("Webhook mode allowed system:anonymous without a SubjectAccessReview")
	}
	if d, _, _ := cfg.Authorizer.Authorize(context.Background(), server.Attributes{User: &server.User{Name: "kube-apiserver-kubelet-client"}, Verb: "get"}); d != server.DecisionAllow {
		t.Error("Webhook mode refused an authenticated client")
	}

	plain, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := plain.serving.agentServer("node-1", nil, time.Now()); err != nil || cfg.TLS != nil || cfg.Authenticator != nil {
		t.Errorf("without a config: %+v, %v; want plain HTTP", cfg, err)
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
