package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/volumes"
)

// maxTokenAge is how old a cached token may get, whatever its expiry, the
// kubelet's.
const maxTokenAge = 24 * time.Hour

// TokensConfig configures a Tokens.
type TokensConfig struct {
	// Client talks to the API server. With the node's identity, the Node
	// authorizer and NodeRestriction let it request tokens only for the
	// service account of a pod bound to the node, bound to that pod.
	// Required.
	Client kubernetes.Interface
	// RequestTimeout bounds each token request. Default 10s.
	RequestTimeout time.Duration
	// Clock tells when a cached token is due for renewal. Default: the
	// real clock.
	Clock clock.PassiveClock
}

// Tokens is a volumes.TokenGetter over the API server's TokenRequest API
// (the serviceaccounts/token subresource), as the kubelet's token manager:
// a token is cached and given again for the same service account,
// audiences, expiry and bound object until 80% of its lifetime has passed
// or it is 24 hours old, and then requested anew. Expired tokens are
// dropped from the cache at the next request.
type Tokens struct {
	cfg TokensConfig

	// mu guards cache.
	mu    sync.Mutex
	cache map[string]cachedToken
}

type cachedToken struct {
	tr      *authenticationv1.TokenRequest
	fetched time.Time
}

var _ volumes.TokenGetter = (*Tokens)(nil)

// NewTokens checks cfg. It does no I/O and starts nothing.
func NewTokens(cfg TokensConfig) (*Tokens, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: TokensConfig.Client is required")
	}
	if err := defaultDuration("TokensConfig", "RequestTimeout", &cfg.RequestTimeout, DefaultRequestTimeout); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Tokens{cfg: cfg, cache: map[string]cachedToken{}}, nil
}

// GetServiceAccountToken implements volumes.TokenGetter: it returns the
// cached token for the request when it is still fresh, else creates one
// with the TokenRequest API. It blocks for at most one request, is safe
// for concurrent use, and the caller must not modify the result. The
// error wraps the API server's (apierrors classifies it).
func (t *Tokens) GetServiceAccountToken(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if req == nil {
		return nil, fmt.Errorf("kube: token for service account %s/%s: no request", namespace, name)
	}
	key := tokenKey(namespace, name, req)
	now := t.cfg.Clock.Now()
	t.mu.Lock()
	for k, c := range t.cache {
		if !now.Before(c.tr.Status.ExpirationTimestamp.Time) {
			delete(t.cache, k)
		}
	}
	c, ok := t.cache[key]
	t.mu.Unlock()
	if ok && !needsRefresh(c, now) {
		return c.tr, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout)
	defer cancel()
	tr, err := t.cfg.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: token for service account %s/%s: %w", namespace, name, err)
	}
	t.mu.Lock()
	t.cache[key] = cachedToken{tr: tr, fetched: now}
	t.mu.Unlock()
	return tr, nil
}

// needsRefresh tells whether a cached token is past 80% of its life or a
// day old.
func needsRefresh(c cachedToken, now time.Time) bool {
	exp := c.tr.Status.ExpirationTimestamp.Time
	life := exp.Sub(c.fetched)
	return !now.Before(c.fetched.Add(life*8/10)) || now.Sub(c.fetched) > maxTokenAge
}

func tokenKey(namespace, name string, req *authenticationv1.TokenRequest) string {
	aud := append([]string(nil), req.Spec.Audiences...)
	sort.Strings(aud)
	var exp int64
	if req.Spec.ExpirationSeconds != nil {
		exp = *req.Spec.ExpirationSeconds
	}
	var bound string
	if b := req.Spec.BoundObjectRef; b != nil {
		bound = b.Kind + "/" + b.Name + "/" + string(b.UID)
	}
	return fmt.Sprintf("%s/%s|%s|%d|%s", namespace, name, strings.Join(aud, ","), exp, bound)
}
