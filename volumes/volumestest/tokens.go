package volumestest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/volumes"
)

// Tokens is an in-memory volumes.TokenGetter for tests and harnesses. It
// answers every request with a new token
// "token-<n>:<namespace>/<name>:<audiences>" (n counts requests from 1)
// that expires after the requested expirationSeconds (3600 when unset)
// from Clock's now. Set Err to make requests fail. The zero value is
// ready; methods are safe for concurrent use and never block.
type Tokens struct {
	// Clock tells when tokens expire; nil means the real clock.
	Clock clock.PassiveClock

	mu       sync.Mutex
	err      error
	requests []Request
}

// Request is one request Tokens answered or refused.
type Request struct {
	Namespace, Name string
	Spec            authenticationv1.TokenRequestSpec
}

// SetErr makes the following requests fail with err (nil to succeed).
func (t *Tokens) SetErr(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.err = err
}

// Requests returns the requests received so far, oldest first.
func (t *Tokens) Requests() []Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Request(nil), t.requests...)
}

// GetServiceAccountToken implements volumes.TokenGetter.
func (t *Tokens) GetServiceAccountToken(_ context.Context, namespace, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests = append(t.requests, Request{Namespace: namespace, Name: name, Spec: *req.Spec.DeepCopy()})
	if t.err != nil {
		return nil, t.err
	}
	var clk clock.PassiveClock = clock.RealClock{}
	if t.Clock != nil {
		clk = t.Clock
	}
	out := req.DeepCopy()
	exp := int64(3600)
	if out.Spec.ExpirationSeconds != nil {
		exp = *out.Spec.ExpirationSeconds
	} else {
		out.Spec.ExpirationSeconds = &exp
	}
	out.Status.Token = fmt.Sprintf("token-%d:%s/%s:%s", len(t.requests), namespace, name, strings.Join(req.Spec.Audiences, ","))
	out.Status.ExpirationTimestamp = metav1.NewTime(clk.Now().Add(time.Duration(exp) * time.Second))
	return out, nil
}

var _ volumes.TokenGetter = (*Tokens)(nil)
