// Package httpget builds the HTTP GET requests that probes and lifecycle
// hooks make from a v1.HTTPGetAction, and the transport they share: the
// kubelet does the same in both places, with the same rules.
package httpget

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// NewRequest builds the GET request of an action: the action's scheme
// (default http), host (default host), the resolved port and path, its
// headers (a "Host" header sets the request's host), and userAgent
// unless the action sets one.
func NewRequest(ctx context.Context, a *v1.HTTPGetAction, host string, port int, userAgent string) (*http.Request, error) {
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	if a.Host != "" {
		host = a.Host
	}
	path := a.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	if err != nil {
		return nil, fmt.Errorf("invalid URL for path %q: %w", a.Path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for _, h := range a.HTTPHeaders {
		if strings.EqualFold(h.Name, "host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	return req, nil
}

// NewTransport returns the transport probes and hooks use: no certificate
// checks (the kubelet verifies neither), no keep-alives, no proxy. It is
// safe to share.
func NewTransport() *http.Transport {
	return &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet
		DisableKeepAlives: true,
		Proxy:             nil,
	}
}
