package images

import (
	"context"
	"errors"
	"fmt"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// Waiting reasons of a container whose image is not there, the kubelet's.
const (
	ReasonErrImagePull      = "ErrImagePull"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	ReasonInvalidImageName  = "InvalidImageName"
)

// Event reasons, the kubelet's.
const (
	reasonPulling           = "Pulling"
	reasonPulled            = "Pulled"
	reasonFailed            = "Failed"
	reasonBackOff           = "BackOff"
	reasonFailedToGetSecret = "FailedToRetrieveImagePullSecret"
)

// Manager makes sure containers' images are present, pulling them as
// their pull policy says. It keeps the pull back-off and the pull slots;
// everything else it asks the image service. It is safe for concurrent
// use.
type Manager struct {
	cfg     Config
	backoff *backoff.Tracker
	// slots holds one token per pull under way.
	slots chan struct{}
}

// New returns a Manager over cfg.Service. It does no I/O and starts no
// goroutine.
func New(cfg Config) (*Manager, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Manager{
		cfg:     cfg,
		backoff: backoff.New(backoff.Policy(cfg.BackOff), cfg.Clock),
		slots:   make(chan struct{}, max(cfg.MaxParallelPulls, 1)),
	}, nil
}

// pullPolicy returns the container's pull policy, defaulted as the API
// server does: Always for ":latest" or no tag, IfNotPresent otherwise.
func pullPolicy(c *v1.Container, named reference.Named) v1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	if _, digested := named.(reference.Digested); digested {
		return v1.PullIfNotPresent
	}
	if t, ok := named.(reference.Tagged); ok && t.Tag() != "latest" {
		return v1.PullIfNotPresent
	}
	return v1.PullAlways
}

// EnsureImage makes sure the image of the pod's container c is present
// according to its pull policy and returns the image as the runtime
// describes it. field names the container in errors
// ("spec.containers[app]"); sandboxConfig is passed on to PullImage.
//
// On failure it returns the container's waiting reason with the error:
// InvalidImageName, ErrImageNeverPull, ErrImagePull, or ImagePullBackOff
// while the back-off of an earlier failed pull of the same image for the
// same pod lasts (no pull is tried then). It blocks for the pull, and
// for a pull slot while MaxParallelPulls pulls are under way; it returns
// when ctx ends. It records the kubelet's events through Config.Events.
// The image returned belongs to the caller.
func (m *Manager) EnsureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, field string, sandboxConfig *runtimeapi.PodSandboxConfig) (*runtimeapi.Image, string, error) {
	if c.Image == "" {
		return nil, ReasonInvalidImageName, fmt.Errorf("%s.image: must not be empty", field)
	}
	named, err := reference.ParseNormalizedNamed(c.Image)
	if err != nil {
		return nil, ReasonInvalidImageName, fmt.Errorf("%s.image: invalid image name %q: %v", field, c.Image, err)
	}
	spec := &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image}
	policy := pullPolicy(c, named)
	if policy != v1.PullAlways {
		img, err := m.imageStatus(ctx, spec)
		if err != nil {
			return nil, ReasonErrImagePull, err
		}
		if img != nil {
			return img, "", nil
		}
		if policy == v1.PullNever {
			err := fmt.Errorf("container image %q is not present with pull policy of Never", c.Image)
			m.cfg.Events(pod, v1.EventTypeWarning, ReasonErrImageNeverPull, err.Error())
			return nil, ReasonErrImageNeverPull, err
		}
	}

	key := string(pod.UID) + "/" + c.Image
	if left := m.backoff.RemainingSinceUpdate(key); left > 0 {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		m.cfg.Events(pod, v1.EventTypeNormal, reasonBackOff, msg)
		return nil, ReasonImagePullBackOff, errors.New(msg)
	}
	auths, err := m.pullAuths(ctx, pod, named)
	if err != nil {
		m.backoff.Next(key, m.cfg.Clock.Now())
		return nil, ReasonErrImagePull, err
	}
	m.cfg.Events(pod, v1.EventTypeNormal, reasonPulling, fmt.Sprintf("Pulling image %q", c.Image))
	start := m.cfg.Clock.Now()
	if err := m.pull(ctx, spec, auths, sandboxConfig); err != nil {
		m.backoff.Next(key, m.cfg.Clock.Now())
		err = fmt.Errorf("failed to pull image %q: %w", c.Image, err)
		m.cfg.Events(pod, v1.EventTypeWarning, reasonFailed, err.Error())
		return nil, ReasonErrImagePull, err
	}
	m.cfg.Events(pod, v1.EventTypeNormal, reasonPulled, fmt.Sprintf("Successfully pulled image %q in %s", c.Image, m.cfg.Clock.Since(start).Round(1e6)))
	img, err := m.imageStatus(ctx, spec)
	if err != nil {
		return nil, ReasonErrImagePull, err
	}
	if img == nil {
		return nil, ReasonErrImagePull, fmt.Errorf("image %q is not present after a successful pull", c.Image)
	}
	return img, "", nil
}

func (m *Manager) imageStatus(ctx context.Context, spec *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	st, err := m.cfg.Service.ImageStatus(ctx, spec, false)
	if err != nil {
		return nil, fmt.Errorf("image status %q: %w", spec.GetImage(), criclient.Wrap("ImageStatus", spec.GetImage(), err))
	}
	return st.GetImage(), nil
}
