package httpget_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/httpget"
)

func TestNewRequest(t *testing.T) {
	a := &v1.HTTPGetAction{Path: "healthz?x=1", Scheme: v1.URISchemeHTTPS, HTTPHeaders: []v1.HTTPHeader{
		{Name: "Host", Value: "example.test"}, {Name: "X-A", Value: "1"}, {Name: "User-Agent", Value: "mine"},
	}}
	req, err := httpget.NewRequest(context.Background(), a, "127.0.0.1", 8443, "kube-probe/1.37")
	if err != nil {
		t.Fatal(err)
	}
	if req.URL.String() != "https://127.0.0.1:8443/healthz?x=1" || req.Host != "example.test" || req.Header.Get("X-A") != "1" || req.UserAgent() != "mine" {
		t.Errorf("request %s host %q headers %v", req.URL, req.Host, req.Header)
	}
	a = &v1.HTTPGetAction{Host: "127.0.0.9"}
	req, _ = httpget.NewRequest(context.Background(), a, "127.0.0.1", 80, "ua")
	if req.URL.String() != "http://127.0.0.9:80/" || req.UserAgent() != "ua" {
		t.Errorf("request %s user agent %q", req.URL, req.UserAgent())
	}
}
