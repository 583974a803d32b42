package server_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodekit/nodekit/runtime/fakecri"
	"github.com/nodekit/nodekit/server"
)

// testCA is a CA that signs client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its PEM
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, file: file}
}

func (ca *testCA) client(t *testing.T, cn string, orgs ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// recordingAuthorizer allows what allow says and records what it was asked.
type recordingAuthorizer struct {
	mu    sync.Mutex
	asked []server.Attributes
	allow func(server.Attributes) bool
	err   error
}

func (a *recordingAuthorizer) Authorize(_ context.Context, attr server.Attributes) (server.Decision, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, attr)
	if a.err != nil {
		return server.DecisionNoOpinion, "", a.err
	}
	if a.allow(attr) {
		return server.DecisionAllow, "", nil
	}
	return server.DecisionNoOpinion, "", nil
}

// A real HTTPS server with a self-signed certificate authenticates a
// client certificate of its CA, a bearer token, and no credentials only
// when anonymous access is on; it answers 401 and 403 as the kubelet does.
func TestAuthenticationAndAuthorizationOverTLS(t *testing.T) {
	ca := newTestCA(t, "cluster-ca")
	other := newTestCA(t, "another-ca")
	tokens := server.TokenAuthenticatorFunc(func(_ context.Context, token string) (*server.User, bool, error) {
		switch token {
		case "bob-token":
			return &server.User{Name: "bob", Groups: []string{"ops"}}, true, nil
		case "broken":
			return nil, false, errors.New("the token review failed")
		}
		return nil, false, nil
	})
	authz := &recordingAuthorizer{allow: func(a server.Attributes) bool {
		switch a.User.Name {
		case "alice":
			return true
		case "bob":
			return a.Subresource == "pods"
		}
		return false
	}}
	tlsCfg, err := server.TLSConfig(server.TLSOptions{Hosts: []string{"node-1", "127.0.0.1"}, Now: time.Now(), ClientCAFile: ca.file})
	if err != nil {
		t.Fatal(err)
	}
	servingCA := x509.NewCertPool()
	servingCA.AddCert(tlsCfg.Certificates[0].Leaf)

	start := func(anonymous bool) string {
		authn, err := server.NewAuthenticator(server.AuthenticatorConfig{ClientCAFile: ca.file, Tokens: tokens, Anonymous: anonymous})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(server.Config{NodeName: "node-1", Pods: newFakeNode(), Authenticator: authn, Authorizer: authz})
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, lis, tlsCfg) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
		return "https://" + lis.Addr().String()
	}
	closed, anon := start(false), start(true)

	do := func(base, method, path string, cert *tls.Certificate, token string) (int, string) {
		t.Helper()
		cfg := &tls.Config{RootCAs: servingCA, ServerName: "node-1"}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	alice := ca.client(t, "alice", "admins")
	mallory := other.client(t, "alice")
	for _, tc := range []struct {
		name   string
		base   string
		method string
		path   string
		cert   *tls.Certificate
		token  string
		code   int
		body   string
	}{
		{"client certificate", closed, "GET", "/healthz", &alice, "", 200, "ok"},
		{"certificate of another CA", closed, "GET", "/healthz", &mallory, "", 401, "Unauthorized"},
		{"no credentials", closed, "GET", "/healthz", nil, "", 401, "Unauthorized"},
		{"unknown token", closed, "GET", "/healthz", nil, "nobody", 401, "Unauthorized"},
		{"token review error", closed, "GET", "/healthz", nil, "broken", 401, "Unauthorized"},
		{"token allowed pods", closed, "GET", "/pods", nil, "bob-token", 200, `{"kind":"PodList"`},
		{"token denied metrics", closed, "GET", "/metrics", nil, "bob-token", 403, "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[metrics])"},
		{"token denied exec", closed, "POST", "/exec/ns/pod/c?command=ls&output=1", nil, "bob-token", 403, "Forbidden (user=bob, verb=create, resource=nodes, subresource(s)=[proxy])"},
		{"anonymous denied", anon, "GET", "/pods", nil, "", 403, "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource(s)=[pods proxy])"},
		{"anonymous with a bad token", anon, "GET", "/pods", nil, "nobody", 401, "Unauthorized"},
	} {
		code, body := do(tc.base, tc.method, tc.path, tc.cert, tc.token)
		if code != tc.code || !strings.HasPrefix(body, tc.body) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, code, body, tc.code, tc.body)
		}
	}
	authz.mu.Lock()
	var aliceAsked *server.Attributes
	for i, a := range authz.asked {
		if a.User.Name == "alice" {
			aliceAsked = &authz.asked[i]
		}
	}
	authz.mu.Unlock()
	want := server.Attributes{
		User: &server.User{Name: "alice", Groups: []string{"admins", server.AuthenticatedGroup}},
		Verb: "get", APIVersion: "v1", Resource: "nodes", Subresource: "healthz", Name: "node-1", Path: "/healthz",
	}
	if aliceAsked == nil {
		t.Fatal("the authorizer was not asked about alice")
	}
	if d := cmp.Diff(want, *aliceAsked); d != "" {
		t.Errorf("attributes of alice's request (-want +got):\n%s", d)
	}
}

func TestAuthorizerErrorIs500(t *testing.T) {
	authn, err := server.NewAuthenticator(server.AuthenticatorConfig{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{NodeName: "n", Pods: newFakeNode(), Authenticator: authn,
		Authorizer: &recordingAuthorizer{err: errors.New("webhook down")}})
	if err != nil {
		t.Fatal(err)
	}
	code, body := getHandler(t, srv.Handler(), "/healthz")
	if code != 500 || !strings.Contains(body, "Authorization error (user=system:anonymous, verb=get, resource=nodes, subresource=healthz)") {
		t.Errorf("%d %q", code, body)
	}
}

func TestRequestAttributes(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		verb         string
		subs         []string
	}{
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/metrics/probes", "get", []string{"metrics"}},
		{"GET", "/logs/syslog", "get", []string{"log"}},
		{"GET", "/containerLogs/ns/p/c", "get", []string{"proxy"}},
		{"POST", "/exec/ns/p/c", "create", []string{"proxy"}},
		{"GET", "/portForward/ns/p", "get", []string{"proxy"}},
		{"PUT", "/podsx", "update", []string{"proxy"}},
		{"DELETE", "/checkpoint/ns/p/c", "delete", []string{"checkpoint"}},
		{"PATCH", "/", "patch", []string{"proxy"}},
	} {
		r, _ := http.NewRequest(tc.method, "http://node"+tc.path, nil)
		attrs := server.RequestAttributes("node-1", &server.User{Name: "u"}, r)
		var subs []string
		for _, a := range attrs {
			subs = append(subs, a.Subresource)
			if a.Verb != tc.verb || a.Resource != "nodes" || a.Name != "node-1" || a.APIVersion != "v1" || a.Path != tc.path {
				t.Errorf("%s %s: %+v", tc.method, tc.path, a)
			}
		}
		if !cmp.Equal(subs, tc.subs) {
			t.Errorf("%s %s: subresources %v, want %v", tc.method, tc.path, subs, tc.subs)
		}
	}
}

func TestTLSConfigRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		opts server.TLSOptions
		want string
	}{
		{server.TLSOptions{Now: time.Now()}, "needs the node's names"},
		{server.TLSOptions{CertFile: "x.crt"}, "CertFile and KeyFile go together"},
		{server.TLSOptions{CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key"}, "serving certificate"},
		{server.TLSOptions{Hosts: []string{"n"}, Now: time.Now(), ClientCAFile: "/nonexistent-ca.crt"}, "client CA file"},
	} {
		if _, err := server.TLSConfig(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TLSConfig(%+v): %v, want %q", tc.opts, err, tc.want)
		}
	}
}

func getHandler(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := newRecorder()
	h.ServeHTTP(rec, mustRequest(t, path))
	return rec.Code, rec.Body.String()
}

// An exec over HTTPS with a client certificate is authorized as
// nodes/proxy with verb create, and its stream goes through; without
// rights it is refused 403 before any stream.
func TestExecOverTLSWithAClientCertificate(t *testing.T) {
	ca := newTestCA(t, "cluster-ca")
	authz := &recordingAuthorizer{allow: func(a server.Attributes) bool {
		return a.User.Name == "admin" && a.Subresource == "proxy" && a.Verb == "create"
	}}
	srv, _ := streamingServer(t, fakecri.Behavior{}, func(c *server.Config) {
		authn, err := server.NewAuthenticator(server.AuthenticatorConfig{ClientCAFile: ca.file})
		if err != nil {
			t.Fatal(err)
		}
		c.Authenticator, c.Authorizer = authn, authz
	})
	tlsCfg, err := server.TLSConfig(server.TLSOptions{Hosts: []string{"127.0.0.1"}, Now: time.Now(), ClientCAFile: ca.file})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, lis, tlsCfg) }()
	defer func() {
		scancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	servingPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsCfg.Certificates[0].Leaf.Raw})
	base := "https://" + lis.Addr().String()
	exec := func(user string) (string, error) {
		cert := ca.client(t, user)
		keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &restclient.Config{Host: base, TLSClientConfig: restclient.TLSClientConfig{
			CAData:   servingPEM,
			CertData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
			KeyData:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		}}
		u, _ := url.Parse(base + "/exec/ns/web/app?command=cat&input=1&output=1")
		e, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var out bytes.Buffer
		err = e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("secret\n"), Stdout: &out})
		return out.String(), err
	}
	if out, err := exec("admin"); err != nil || out != "secret\n" {
		t.Errorf("admin's exec: %v, stdout %q", err, out)
	}
	if _, err := exec("guest"); err == nil || !strings.Contains(err.Error(), "Forbidden (user=guest, verb=create, resource=nodes, subresource(s)=[proxy])") {
		t.Errorf("guest's exec: %v, want 403 Forbidden", err)
	}
}
