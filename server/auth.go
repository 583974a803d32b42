package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
)

// User is who a request comes from, as an authenticator found it.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Authenticator identifies the client of a request. It returns the user
// and true; false with a nil error when the request carries no
// credentials it knows; an error when they are invalid or could not be
// checked. Either of the last two is answered 401 "Unauthorized", as the
// kubelet does. Implementations must be safe for concurrent use.
type Authenticator interface {
	Authenticate(r *http.Request) (*User, bool, error)
}

// TokenAuthenticator checks a bearer token: the webhook of a TokenReview
// fits here. It returns false with a nil error for a token it does not
// know. It may block until ctx ends and must be safe for concurrent use.
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, token string) (*User, bool, error)
}

// TokenAuthenticatorFunc adapts a func to TokenAuthenticator.
type TokenAuthenticatorFunc func(ctx context.Context, token string) (*User, bool, error)

// AuthenticateToken calls f.
func (f TokenAuthenticatorFunc) AuthenticateToken(ctx context.Context, token string) (*User, bool, error) {
	return f(ctx, token)
}

// Attributes is what an Authorizer decides on, as the kubelet builds it
// for a request: resource "nodes" of API version v1, Name the node, Verb
// from the HTTP method (get, create, update, patch, delete), and
// Subresource from the path (stats, metrics, log, pods, healthz, configz,
// proxy).
type Attributes struct {
	User        *User
	Verb        string
	APIGroup    string
	APIVersion  string
	Resource    string
	Subresource string
	Name        string
	// Path is the request's path.
	Path string
}

// Decision is an Authorizer's answer.
type Decision int

// The decisions: DecisionNoOpinion is a denial when no other authorizer
// allows.
const (
	DecisionDeny Decision = iota
	DecisionAllow
	DecisionNoOpinion
)

// Authorizer decides whether a user may do what Attributes say. An error
// is answered 500, a decision other than DecisionAllow 403. The webhook
// of a SubjectAccessReview fits here. It may block until ctx ends and
// must be safe for concurrent use.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (d Decision, reason string, err error)
}

// AuthorizerFunc adapts a func to Authorizer.
type AuthorizerFunc func(ctx context.Context, a Attributes) (Decision, string, error)

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	return f(ctx, a)
}

// The users and groups of the API server's conventions.
const (
	AnonymousUser        = "system:anonymous"
	UnauthenticatedGroup = "system:unauthenticated"
	AuthenticatedGroup   = "system:authenticated"
)

// AuthenticatorConfig configures NewAuthenticator, after the kubelet's
// authentication settings.
type AuthenticatorConfig struct {
	// ClientCAFile is a PEM bundle: a client certificate signed by one of
	// its CAs, for client authentication, authenticates its Subject's
	// CommonName as the user and its Organizations as groups. Empty: no
	// client certificates.
	ClientCAFile string
	// Tokens checks "Authorization: Bearer" tokens. Nil: tokens are not
	// accepted.
	Tokens TokenAuthenticator
	// Anonymous lets a request with no credentials through as
	// system:anonymous in group system:unauthenticated. Default false: it
	// is answered 401. A request with invalid credentials is answered 401
	// either way.
	Anonymous bool
}

// NewAuthenticator returns an Authenticator that tries a client
// certificate, then a bearer token, then (if allowed) anonymous access.
// An authenticated user also gets group system:authenticated. It reads
// ClientCAFile once; it fails when the file cannot be read or holds no
// certificate.
func NewAuthenticator(cfg AuthenticatorConfig) (Authenticator, error) {
	a := &authenticator{tokens: cfg.Tokens, anonymous: cfg.Anonymous}
	if cfg.ClientCAFile != "" {
		pool, err := LoadCAFile(cfg.ClientCAFile)
		if err != nil {
			return nil, err
		}
		a.roots = pool
	}
	return a, nil
}

// LoadCAFile reads a PEM bundle of CA certificates.
func LoadCAFile(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("server: client CA file %s holds no PEM certificate", path)
	}
	return pool, nil
}

type authenticator struct {
	roots     *x509.CertPool
	tokens    TokenAuthenticator
	anonymous bool
}

func (a *authenticator) Authenticate(r *http.Request) (*User, bool, error) {
	var errs []error
	if a.roots != nil && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		certs := r.TLS.PeerCertificates
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{
			Roots: a.roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err == nil && certs[0].Subject.CommonName != "" {
			return authenticated(&User{Name: certs[0].Subject.CommonName, Groups: slices.Clone(certs[0].Subject.Organization)}), true, nil
		}
		if err == nil {
			err = errors.New("the client certificate has no common name")
		}
		errs = append(errs, fmt.Errorf("client certificate: %w", err))
	}
	if token, ok := bearer(r); ok {
		if a.tokens == nil {
			errs = append(errs, errors.New("bearer tokens are not accepted"))
		} else {
			u, ok, err := a.tokens.AuthenticateToken(r.Context(), token)
			if err != nil {
				errs = append(errs, fmt.Errorf("bearer token: %w", err))
			} else if ok && u != nil {
				return authenticated(u), true, nil
			} else {
				errs = append(errs, errors.New("bearer token: not recognised"))
			}
		}
	}
	if len(errs) > 0 {
		return nil, false, errors.Join(errs...)
	}
	if a.anonymous {
		return &User{Name: AnonymousUser, Groups: []string{UnauthenticatedGroup}}, true, nil
	}
	return nil, false, nil
}

func authenticated(u *User) *User {
	c := *u
	c.Groups = slices.Clone(u.Groups)
	if !slices.Contains(c.Groups, AuthenticatedGroup) {
		c.Groups = append(c.Groups, AuthenticatedGroup)
	}
	return &c
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// RequestAttributes returns the attributes the kubelet authorizes a
// request by: one per subresource the path maps to, any one of which
// allowed lets the request through. /pods, /runningpods, /healthz and
// /configz map to their own subresource (pods, pods, healthz, configz)
// and to proxy; /stats to stats, /metrics to metrics, /logs (the node's
// logs) to log, /checkpoint to checkpoint; anything else, /containerLogs,
// /exec, /attach and /portForward among them, to proxy.
func RequestAttributes(nodeName string, u *User, r *http.Request) []Attributes {
	verb := ""
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		verb = "get"
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	path := r.URL.Path
	var subs []string
	switch {
	case under(path, "/pods"), under(path, "/runningpods"):
		subs = append(subs, "pods")
	case under(path, "/healthz"):
		subs = append(subs, "healthz")
	case under(path, "/configz"):
		subs = append(subs, "configz")
	}
	switch {
	case under(path, "/stats"):
		subs = append(subs, "stats")
	case under(path, "/metrics"):
		subs = append(subs, "metrics")
	case under(path, "/logs"):
		subs = append(subs, "log")
	case under(path, "/checkpoint"):
		subs = append(subs, "checkpoint")
	default:
		subs = append(subs, "proxy")
	}
	out := make([]Attributes, 0, len(subs))
	for _, sub := range subs {
		out = append(out, Attributes{
			User: u, Verb: verb, APIVersion: "v1", Resource: "nodes", Subresource: sub, Name: nodeName, Path: path,
		})
	}
	return out
}

// under reports whether path is dir or lies below it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// authFilter authenticates and authorizes each request before next, with
// the kubelet's answers: 401 "Unauthorized", 403 naming the user, verb,
// resource and subresources, 500 on an authorizer's error.
func (s *Server) authFilter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := s.cfg.Authenticator.Authenticate(r)
		if err != nil {
			s.cfg.Logger.V(2).Info("request not authenticated", "path", r.URL.Path, "err", err)
		}
		if err != nil || !ok || u == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if s.cfg.Authorizer == nil {
			next.ServeHTTP(w, r)
			return
		}
		attrs := RequestAttributes(s.cfg.NodeName, u, r)
		subs := make([]string, 0, len(attrs))
		for _, a := range attrs {
			subs = append(subs, a.Subresource)
			d, _, err := s.cfg.Authorizer.Authorize(r.Context(), a)
			if err != nil {
				s.cfg.Logger.Error(err, "authorization error", "user", u.Name, "verb", a.Verb, "subresource", a.Subresource)
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)", u.Name, a.Verb, a.Resource, a.Subresource), http.StatusInternalServerError)
				return
			}
			if d == DecisionAllow {
				next.ServeHTTP(w, r)
				return
			}
		}
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)", u.Name, attrs[0].Verb, attrs[0].Resource, subs), http.StatusForbidden)
	})
}
