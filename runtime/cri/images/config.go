package images

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	criapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/runtime"
)

// Defaults of Config, the kubelet's except for the pull timeout.
const (
	// Image-pull back-off: 10 s doubling to 5 min.
	DefaultBackOffInitial = 10 * time.Second
	DefaultBackOffMax     = 300 * time.Second
	// DefaultPullTimeout bounds one image pull. The kubelet sets no bound
	// (its runtime request timeout leaves pulls out, and containerd gives
	// up on a pull that makes no progress for 5 min); 30 min lets a
	// multi-gigabyte image through a slow link, and still frees the pull
	// slot from a runtime that hangs.
	DefaultPullTimeout = 30 * time.Minute
)

// SecretGetter gives the manager the image pull secrets pods name.
// runtime/cri's ObjectGetter is one.
type SecretGetter interface {
	// GetSecret returns the secret; an error means it cannot be used
	// (whatever the reason, the pull goes on without it).
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// BackOff configures the pull back-off: Initial, doubling up to Max,
// forgotten after Reset without a failure.
type BackOff struct {
	Initial time.Duration
	Max     time.Duration
	// Reset is how long a pod's image must go without a failed pull to
	// start again from Initial. Zero means twice Max, as in the kubelet.
	Reset time.Duration
}

// Config configures a Manager. Only Service is required; every other
// field's zero value is the documented default.
type Config struct {
	// Service is the CRI image service that pulls and reports images.
	Service criapi.ImageManagerService
	// Secrets resolves pods' imagePullSecrets. Nil: a pod that names one
	// gets a FailedToRetrieveImagePullSecret event and pulls without it.
	Secrets SecretGetter
	// BackOff is the pull back-off (ImagePullBackOff), per pod and
	// image. Zero fields take DefaultBackOffInitial and DefaultBackOffMax.
	BackOff BackOff
	// MaxParallelPulls bounds concurrent pulls. 0 or 1 serializes pulls,
	// the kubelet's default.
	MaxParallelPulls int
	// PullTimeout bounds one image pull (every credential tried),
	// counted on Clock from when the pull gets its slot, so waiting
	// behind other pulls does not count. A pull cut off fails with
	// ErrImagePull and enters the back-off. Default DefaultPullTimeout;
	// negative means no bound. Pulls also end when the caller's context
	// does.
	PullTimeout time.Duration
	// Clock drives the back-off and the pull timeout. Default: the real
	// clock.
	Clock clock.Clock
	// Events receives the events about pods (Pulling, Pulled, Failed,
	// BackOff, ErrImageNeverPull, FailedToRetrieveImagePullSecret). It
	// must not block. Default: discard.
	Events runtime.EventFunc
}

func (c *Config) defaults() error {
	if c.Service == nil {
		return errors.New("images: Config.Service is required")
	}
	if c.MaxParallelPulls < 0 {
		return fmt.Errorf("images: Config.MaxParallelPulls must not be negative, got %d", c.MaxParallelPulls)
	}
	if c.PullTimeout == 0 {
		c.PullTimeout = DefaultPullTimeout
	}
	c.BackOff = BackOff(backoff.Policy(c.BackOff).WithDefaults(DefaultBackOffInitial, DefaultBackOffMax))
	if b := c.BackOff; b.Initial <= 0 || b.Max < b.Initial {
		return fmt.Errorf("images: Config.BackOff: want 0 < Initial <= Max, got %v and %v", b.Initial, b.Max)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Events == nil {
		c.Events = func(*v1.Pod, string, string, string) {}
	}
	return nil
}
