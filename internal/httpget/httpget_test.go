package httpget_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
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

func TestNewRequestAccept(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers []v1.HTTPHeader
		want    []string
	}{
		{"default", nil, []string{"*/*"}},
		{"the action's", []v1.HTTPHeader{{Name: "accept", Value: "text/plain"}}, []string{"text/plain"}},
		{"set empty: none", []v1.HTTPHeader{{Name: "Accept", Value: ""}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := httpget.NewRequest(context.Background(), &v1.HTTPGetAction{HTTPHeaders: tc.headers}, "127.0.0.1", 80, "ua")
			if err != nil {
				t.Fatal(err)
			}
			if got := req.Header.Values("Accept"); !slices.Equal(got, tc.want) {
				t.Errorf("Accept %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckRedirect(t *testing.T) {
	req := func(u string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := []*http.Request{req("http://10.0.0.1:80/a")}
	if err := httpget.CheckRedirect(req("http://10.0.0.1:81/b"), first); err != nil {
		t.Errorf("same host, other port: %v, want followed", err)
	}
	if err := httpget.CheckRedirect(req("http://10.0.0.2:80/b"), first); !errors.Is(err, http.ErrUseLastResponse) {
		t.Errorf("other host: %v, want ErrUseLastResponse", err)
	}
	var ten []*http.Request
	for range 10 {
		ten = append(ten, first[0])
	}
	if err := httpget.CheckRedirect(req("http://10.0.0.1/c"), ten); err == nil || errors.Is(err, http.ErrUseLastResponse) {
		t.Errorf("eleventh redirect: %v, want an error", err)
	}
}
