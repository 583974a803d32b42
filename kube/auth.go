package kube

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/server"
)

// The defaults of the review caches, the kubelet's: authentication.webhook.cacheTTL,
// authorization.webhook.cacheAuthorizedTTL and cacheUnauthorizedTTL.
const (
	DefaultTokenCacheTTL        = 2 * time.Minute
	DefaultAuthorizedCacheTTL   = 5 * time.Minute
	DefaultUnauthorizedCacheTTL = 30 * time.Second
	// DefaultReviewCacheSize bounds each cache: past it, expired entries
	// are dropped, then arbitrary ones.
	DefaultReviewCacheSize = 10000
)

// TokenReviewConfig configures a TokenReviewAuthenticator. Zero fields take
// the defaults named; Client is required.
type TokenReviewConfig struct {
	// Client creates the TokenReviews (authentication.k8s.io/v1). The
	// node's own identity may: the Node authorizer lets system:nodes
	// create tokenreviews.
	Client kubernetes.Interface
	// Audiences, when set, are sent in each review's spec, and a token is
	// accepted only when the review's status.audiences names one of them.
	// Default: none, the API server's own audiences (as the kubelet).
	Audiences []string
	// CacheTTL is how long an answer is kept: a user found, and a token the
	// API server said is not authenticated without an error text. A
	// review that failed, or whose status carries an error (an invalid or
	// expired token, as the API server answers), is not kept, as the
	// kubelet keeps neither. Default 2m (authentication.webhook.cacheTTL);
	// negative: nothing is kept.
	CacheTTL time.Duration
	// CacheSize bounds the number of answers kept. Default
	// DefaultReviewCacheSize.
	CacheSize int
	// Timeout bounds each review, its retries included. Default
	// DefaultRequestTimeout (10s).
	Timeout time.Duration
	// Clock times the cache and the retries. Default: the real clock.
	Clock clock.Clock
}

// TokenReviewAuthenticator is a server.TokenAuthenticator that asks the API
// server whether a bearer token is valid with a TokenReview, as the kubelet
// does in authentication.webhook mode. It is safe for concurrent use.
type TokenReviewAuthenticator struct {
	cfg   TokenReviewConfig
	cache *reviewCache[tokenAnswer]
}

var _ server.TokenAuthenticator = (*TokenReviewAuthenticator)(nil)

type tokenAnswer struct {
	user *server.User // nil: not authenticated
}

// NewTokenReviewAuthenticator validates cfg and returns the authenticator.
// It does no I/O and starts no goroutine.
func NewTokenReviewAuthenticator(cfg TokenReviewConfig) (*TokenReviewAuthenticator, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: TokenReviewConfig.Client is required")
	}
	cfg.Audiences = slices.Clone(cfg.Audiences)
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultTokenCacheTTL
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultReviewCacheSize
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultRequestTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &TokenReviewAuthenticator{cfg: cfg, cache: newReviewCache[tokenAnswer](cfg.Clock, cfg.CacheSize)}, nil
}

// AuthenticateToken returns the user the API server found for token, from
// the cache when it holds a fresh answer. It returns false and a nil error
// for a token the API server did not authenticate, or one of none of
// Config.Audiences; false and an error when the review failed or its
// status carries an error text (the server answers either 401). It blocks
// for at most Config.Timeout or until ctx ends. The returned User is the
// caller's.
func (a *TokenReviewAuthenticator) AuthenticateToken(ctx context.Context, token string) (*server.User, bool, error) {
	key := reviewTokenKey(a.cfg.Audiences, token)
	if ans, ok := a.cache.get(key); ok {
		return cloneUser(ans.user), ans.user != nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.cfg.Audiences}}
	var got *authenticationv1.TokenReview
	err := retryReview(ctx, a.cfg.Clock, func() (err error) {
		got, err = a.cfg.Client.AuthenticationV1().TokenReviews().Create(ctx, review, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("kube: token review: %w", err)
	}
	st := got.Status
	if !st.Authenticated {
		if st.Error != "" {
			return nil, false, fmt.Errorf("kube: token review: %s", st.Error)
		}
		a.cache.set(key, tokenAnswer{}, a.cfg.CacheTTL)
		return nil, false, nil
	}
	if len(a.cfg.Audiences) > 0 && !slices.ContainsFunc(st.Audiences, func(aud string) bool { return slices.Contains(a.cfg.Audiences, aud) }) {
		a.cache.set(key, tokenAnswer{}, a.cfg.CacheTTL)
		return nil, false, nil
	}
	u := &server.User{Name: st.User.Username, UID: st.User.UID, Groups: slices.Clone(st.User.Groups)}
	if len(st.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			u.Extra[k] = slices.Clone(v)
		}
	}
	a.cache.set(key, tokenAnswer{user: u}, a.cfg.CacheTTL)
	return cloneUser(u), true, nil
}

// reviewTokenKey hashes the token with the audiences, so that the cache holds no
// token in the clear.
func reviewTokenKey(audiences []string, token string) string {
	h := sha256.New()
	for _, a := range audiences {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	h.Write([]byte{1})
	h.Write([]byte(token))
	return string(h.Sum(nil))
}

func cloneUser(u *server.User) *server.User {
	if u == nil {
		return nil
	}
	c := *u
	c.Groups = slices.Clone(u.Groups)
	if u.Extra != nil {
		c.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			c.Extra[k] = slices.Clone(v)
		}
	}
	return &c
}

// SubjectAccessReviewConfig configures a SubjectAccessReviewAuthorizer.
// Zero fields take the defaults named; Client is required.
type SubjectAccessReviewConfig struct {
	// Client creates the SubjectAccessReviews (authorization.k8s.io/v1).
	// The node's own identity may: the Node authorizer lets system:nodes
	// create subjectaccessreviews.
	Client kubernetes.Interface
	// AuthorizedTTL is how long an allowed answer is kept. Default 5m
	// (authorization.webhook.cacheAuthorizedTTL); negative: not kept.
	AuthorizedTTL time.Duration
	// UnauthorizedTTL is how long a denied (or no-opinion) answer is kept.
	// Default 30s (authorization.webhook.cacheUnauthorizedTTL); negative:
	// not kept. A review that failed is never kept.
	UnauthorizedTTL time.Duration
	// CacheSize bounds the number of answers kept. Default
	// DefaultReviewCacheSize.
	CacheSize int
	// Timeout bounds each review, its retries included. Default
	// DefaultRequestTimeout (10s).
	Timeout time.Duration
	// Clock times the cache and the retries. Default: the real clock.
	Clock clock.Clock
}

// SubjectAccessReviewAuthorizer is a server.Authorizer that asks the API
// server with a SubjectAccessReview whether the user may do what the
// attributes say, as the kubelet does in authorization mode Webhook: for
// the node server, verb get, create... on resource nodes, subresource
// proxy, stats, log, metrics, pods..., name the node. It is safe for
// concurrent use.
type SubjectAccessReviewAuthorizer struct {
	cfg   SubjectAccessReviewConfig
	cache *reviewCache[sarAnswer]
}

var _ server.Authorizer = (*SubjectAccessReviewAuthorizer)(nil)

type sarAnswer struct {
	decision server.Decision
	reason   string
}

// NewSubjectAccessReviewAuthorizer validates cfg and returns the
// authorizer. It does no I/O and starts no goroutine.
func NewSubjectAccessReviewAuthorizer(cfg SubjectAccessReviewConfig) (*SubjectAccessReviewAuthorizer, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: SubjectAccessReviewConfig.Client is required")
	}
	if cfg.AuthorizedTTL == 0 {
		cfg.AuthorizedTTL = DefaultAuthorizedCacheTTL
	}
	if cfg.UnauthorizedTTL == 0 {
		cfg.UnauthorizedTTL = DefaultUnauthorizedCacheTTL
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultReviewCacheSize
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultRequestTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &SubjectAccessReviewAuthorizer{cfg: cfg, cache: newReviewCache[sarAnswer](cfg.Clock, cfg.CacheSize)}, nil
}

// Authorize returns the API server's decision on attrs: DecisionAllow when
// the review's status.allowed, DecisionDeny when status.denied,
// DecisionNoOpinion otherwise (which the server refuses 403), with
// status.reason. A failed review is returned as an error with
// DecisionNoOpinion (the server answers 500). Attributes without a
// Resource are reviewed as a non-resource path. It blocks for at most
// Config.Timeout or until ctx ends.
func (z *SubjectAccessReviewAuthorizer) Authorize(ctx context.Context, attrs server.Attributes) (server.Decision, string, error) {
	spec := reviewSpec(attrs)
	b, err := json.Marshal(spec)
	if err != nil {
		return server.DecisionNoOpinion, "", fmt.Errorf("kube: subject access review: %w", err)
	}
	key := string(b)
	if ans, ok := z.cache.get(key); ok {
		return ans.decision, ans.reason, nil
	}
	ctx, cancel := context.WithTimeout(ctx, z.cfg.Timeout)
	defer cancel()
	var got *authorizationv1.SubjectAccessReview
	err = retryReview(ctx, z.cfg.Clock, func() (err error) {
		got, err = z.cfg.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return server.DecisionNoOpinion, "", fmt.Errorf("kube: subject access review: %w", err)
	}
	ans := sarAnswer{decision: server.DecisionNoOpinion, reason: got.Status.Reason}
	ttl := z.cfg.UnauthorizedTTL
	switch {
	case got.Status.Allowed:
		ans.decision, ttl = server.DecisionAllow, z.cfg.AuthorizedTTL
	case got.Status.Denied:
		ans.decision = server.DecisionDeny
	}
	z.cache.set(key, ans, ttl)
	return ans.decision, ans.reason, nil
}

// The retries of a review, the kubelet's: up to reviewAttempts calls, the
// first wait reviewBackoff, each next one reviewBackoffFactor times longer
// (0.5s, 0.75s, 1.125s, 1.69s), without jitter.
const (
	reviewAttempts      = 5
	reviewBackoff       = 500 * time.Millisecond
	reviewBackoffFactor = 1.5
)

// retryReview calls create until it succeeds, fails with an error that is
// not transient, reviewAttempts calls were made, or ctx ends; it returns
// the last call's error.
func retryReview(ctx context.Context, clk clock.Clock, create func() error) error {
	wait := reviewBackoff
	for attempt := 1; ; attempt++ {
		err := create()
		if err == nil || attempt == reviewAttempts || !transient(err) {
			return err
		}
		t := clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C():
		}
		wait = time.Duration(float64(wait) * reviewBackoffFactor)
	}
}

// transient reports whether a review's error is worth a retry, as the
// kubelet judges it: a connection reset or lost, the API server's internal
// error, timeout or too many requests, or an answer that asks the client
// to come back later.
func transient(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, later := apierrors.SuggestsClientDelay(err)
	return later
}

// reviewSpec is the SubjectAccessReview of attrs.
func reviewSpec(attrs server.Attributes) authorizationv1.SubjectAccessReviewSpec {
	var spec authorizationv1.SubjectAccessReviewSpec
	if u := attrs.User; u != nil {
		spec.User, spec.UID, spec.Groups = u.Name, u.UID, slices.Clone(u.Groups)
		if len(u.Extra) > 0 {
			spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
			for _, k := range slices.Sorted(maps.Keys(u.Extra)) {
				spec.Extra[k] = slices.Clone(u.Extra[k])
			}
		}
	}
	if attrs.Resource == "" {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: attrs.Path, Verb: attrs.Verb}
		return spec
	}
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
		Verb: attrs.Verb, Group: attrs.APIGroup, Version: attrs.APIVersion,
		Resource: attrs.Resource, Subresource: attrs.Subresource, Name: attrs.Name,
	}
	return spec
}

// reviewCache keeps answers until their expiry on a clock, at most max of
// them. It is safe for concurrent use.
type reviewCache[V any] struct {
	clock clock.PassiveClock
	max   int

	mu      sync.Mutex
	entries map[string]cacheEntry[V]
}

type cacheEntry[V any] struct {
	value   V
	expires time.Time
}

func newReviewCache[V any](c clock.PassiveClock, max int) *reviewCache[V] {
	return &reviewCache[V]{clock: c, max: max, entries: map[string]cacheEntry[V]{}}
}

func (c *reviewCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	if !c.clock.Now().Before(e.expires) {
		delete(c.entries, key)
		var zero V
		return zero, false
	}
	return e.value, true
}

// set keeps value for ttl; a ttl of zero or less keeps nothing. When the
// cache is full it drops the expired entries, then arbitrary ones until
// there is room.
func (c *reviewCache[V]) set(key string, value V, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[key] = cacheEntry[V]{value: value, expires: now.Add(ttl)}
}
