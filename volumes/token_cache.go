package volumes

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/utils/clock"
)

const (
	// tokenMaxTTL: a token older than this is asked for again whatever
	// its expiry, as the kubelet's token manager does.
	tokenMaxTTL = 24 * time.Hour
	// tokenMaxJitter spreads refreshes, as the kubelet's does.
	tokenMaxJitter = 10 * time.Second
)

// tokenCache keeps the service-account tokens of projected volumes and
// asks for a new one when a token has lived 80% of its lifetime or 24
// hours, as the kubelet's token manager does. When asking fails, the
// cached token is used while it has not expired. Expired tokens are
// dropped whenever a token is stored. Safe for concurrent use.
type tokenCache struct {
	getter TokenGetter
	clock  clock.PassiveClock

	mu      sync.Mutex
	entries map[string]*authenticationv1.TokenRequest
}

func newTokenCache(g TokenGetter, clk clock.PassiveClock) *tokenCache {
	return &tokenCache{getter: g, clock: clk, entries: map[string]*authenticationv1.TokenRequest{}}
}

func tokenKey(namespace, name string, tr *authenticationv1.TokenRequest) string {
	var exp int64
	if tr.Spec.ExpirationSeconds != nil {
		exp = *tr.Spec.ExpirationSeconds
	}
	var ref authenticationv1.BoundObjectReference
	if tr.Spec.BoundObjectRef != nil {
		ref = *tr.Spec.BoundObjectRef
	}
	return fmt.Sprintf("%q/%q/%q/%d/%q/%q/%q/%q", namespace, name, tr.Spec.Audiences, exp, ref.Kind, ref.APIVersion, ref.Name, ref.UID)
}

// get returns a token for the service account namespace/name, from the
// cache unless it needs a refresh. It blocks while the getter does.
func (c *tokenCache) get(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	key := tokenKey(namespace, name, req)
	c.mu.Lock()
	cached, ok := c.entries[key]
	c.mu.Unlock()
	now := c.clock.Now()
	if ok && !needsRefresh(cached, now) {
		return cached, nil
	}
	tr, err := c.getter.GetServiceAccountToken(ctx, namespace, name, req)
	if err == nil && (tr == nil || tr.Status.Token == "") {
		err = errors.New("the TokenGetter returned no token")
	}
	if err != nil {
		if ok && now.Before(cached.Status.ExpirationTimestamp.Time) {
			return cached, nil
		}
		return nil, err
	}
	if tr.Spec.ExpirationSeconds == nil {
		tr = tr.DeepCopy()
		tr.Spec.ExpirationSeconds = req.Spec.ExpirationSeconds
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if now.After(e.Status.ExpirationTimestamp.Time) {
			delete(c.entries, k)
		}
	}
	c.entries[key] = tr
	return tr, nil
}

// needsRefresh: expired, or past 80% of its lifetime, or older than 24
// hours, each less a random jitter of up to 10 s.
func needsRefresh(tr *authenticationv1.TokenRequest, now time.Time) bool {
	exp := tr.Status.ExpirationTimestamp.Time
	if !now.Before(exp) {
		return true
	}
	if tr.Spec.ExpirationSeconds == nil {
		return false
	}
	lifetime := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	issued := exp.Add(-lifetime)
	jitter := time.Duration(rand.Float64() * float64(tokenMaxJitter))
	return now.After(issued.Add(tokenMaxTTL-jitter)) || now.After(exp.Add(-lifetime/5-jitter))
}
