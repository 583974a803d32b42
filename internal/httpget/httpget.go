// Package httpget builds the HTTP GET requests that probes and lifecycle
// hooks make from a v1.HTTPGetAction, and the transport they share: the
// kubelet does the same in both places, with the same rules.
package httpget

import (
	"context"
	"crypto/tls"
	"errors"
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
// headers (a "Host" header sets the request's host), userAgent unless
// the action sets one, and "Accept: */*" unless the action sets one (an
// empty one sends none), as the kubelet does for probes and hooks alike.
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
	if _, set := req.Header["Accept"]; !set {
		req.Header.Set("Accept", "*/*")
	} else if req.Header.Get("Accept") == "" {
		req.Header.Del("Accept") // set empty: none is sent
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

// CheckRedirect is the redirect rule of probes and hooks, the kubelet's:
// a redirect is followed only to the same host name (any port), at most
// 10 times; a redirect elsewhere is not followed, and the redirect
// response itself is the answer.
func CheckRedirect(r *http.Request, via []*http.Request) error {
	if r.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}
