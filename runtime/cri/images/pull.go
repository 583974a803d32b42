package images

import (
	"context"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime/criclient"
)

// pull pulls with each matching credential in turn (anonymously when none
// matches), holding one of the pull slots: one by default, so pulls are
// serialized as with the kubelet. Once it has its slot the pull has
// Config.PullTimeout; it also ends with ctx.
func (m *Manager) pull(ctx context.Context, spec *runtimeapi.ImageSpec, auths []*runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) error {
	select {
	case m.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-m.slots }()
	if m.cfg.PullTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = withClockTimeout(ctx, m.cfg.Clock, m.cfg.PullTimeout,
			fmt.Errorf("the pull did not finish within %s: %w", m.cfg.PullTimeout, context.DeadlineExceeded))
		defer cancel()
	}
	if len(auths) == 0 {
		auths = []*runtimeapi.AuthConfig{nil}
	}
	var errs []error
	for _, auth := range auths {
		_, err := m.cfg.Service.PullImage(ctx, spec, auth, sandboxConfig)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			// Cut off or cancelled: the other credentials would be too.
			return fmt.Errorf("%w (%v)", context.Cause(ctx), criclient.Wrap("PullImage", spec.GetImage(), err))
		}
		errs = append(errs, criclient.Wrap("PullImage", spec.GetImage(), err))
	}
	return errors.Join(errs...)
}

// withClockTimeout returns a context that ends when ctx does or after d
// on clk, with cause as its cause. Its goroutine ends with the context:
// call the returned cancel when done.
func withClockTimeout(ctx context.Context, clk clock.Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := clk.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			cancel(cause)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}
