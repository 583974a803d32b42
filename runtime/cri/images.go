package cri

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// Image waiting reasons, the kubelet's.
const (
	ReasonErrImagePull       = "ErrImagePull"
	ReasonImagePullBackOff   = "ImagePullBackOff"
	ReasonErrImageNeverPull  = "ErrImageNeverPull"
	ReasonInvalidImageName   = "InvalidImageName"
	reasonPulling            = "Pulling"
	reasonPulled             = "Pulled"
	reasonFailed             = "Failed"
	reasonBackOff            = "BackOff"
	reasonFailedToGetSecret  = "FailedToRetrieveImagePullSecret"
	dockerHubDomain          = "docker.io"
	legacyDockerHubIndexHost = "index.docker.io"
)

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

// ensureImage makes sure the container's image is present according to
// its pull policy and returns the image as the runtime describes it. On
// failure it also returns the waiting reason: InvalidImageName,
// ErrImageNeverPull, ErrImagePull, or ImagePullBackOff while an earlier
// failure's back-off lasts.
func (r *Runtime) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, field string, sandboxConfig *runtimeapi.PodSandboxConfig) (*runtimeapi.Image, string, error) {
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
		img, err := r.imageStatus(ctx, spec)
		if err != nil {
			return nil, ReasonErrImagePull, err
		}
		if img != nil {
			return img, "", nil
		}
		if policy == v1.PullNever {
			err := fmt.Errorf("container image %q is not present with pull policy of Never", c.Image)
			r.cfg.Events(pod, v1.EventTypeWarning, ReasonErrImageNeverPull, err.Error())
			return nil, ReasonErrImageNeverPull, err
		}
	}

	key := string(pod.UID) + "/" + c.Image
	if left := r.pullBackoff.remainingSinceUpdate(key); left > 0 {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		r.cfg.Events(pod, v1.EventTypeNormal, reasonBackOff, msg)
		return nil, ReasonImagePullBackOff, errors.New(msg)
	}
	auths, err := r.pullAuths(ctx, pod, named)
	if err != nil {
		r.pullBackoff.next(key, r.cfg.Clock.Now())
		return nil, ReasonErrImagePull, err
	}
	r.cfg.Events(pod, v1.EventTypeNormal, reasonPulling, fmt.Sprintf("Pulling image %q", c.Image))
	start := r.cfg.Clock.Now()
	if err := r.pull(ctx, spec, auths, sandboxConfig); err != nil {
		r.pullBackoff.next(key, r.cfg.Clock.Now())
		err = fmt.Errorf("failed to pull image %q: %w", c.Image, err)
		r.cfg.Events(pod, v1.EventTypeWarning, reasonFailed, err.Error())
		return nil, ReasonErrImagePull, err
	}
	r.cfg.Events(pod, v1.EventTypeNormal, reasonPulled, fmt.Sprintf("Successfully pulled image %q in %s", c.Image, r.cfg.Clock.Since(start).Round(1e6)))
	img, err := r.imageStatus(ctx, spec)
	if err != nil {
		return nil, ReasonErrImagePull, err
	}
	if img == nil {
		return nil, ReasonErrImagePull, fmt.Errorf("image %q is not present after a successful pull", c.Image)
	}
	return img, "", nil
}

func (r *Runtime) imageStatus(ctx context.Context, spec *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	st, err := r.is.ImageStatus(ctx, spec, false)
	if err != nil {
		return nil, fmt.Errorf("image status %q: %w", spec.GetImage(), criclient.Wrap("ImageStatus", spec.GetImage(), err))
	}
	return st.GetImage(), nil
}

// pull pulls with each matching credential in turn (anonymously when none
// matches), holding one of the pull slots: one by default, so pulls are
// serialized as with the kubelet. Once it has its slot the pull has
// Config.ImagePullTimeout; it also ends with ctx.
func (r *Runtime) pull(ctx context.Context, spec *runtimeapi.ImageSpec, auths []*runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) error {
	select {
	case r.pullSlots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.pullSlots }()
	if r.cfg.ImagePullTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = withClockTimeout(ctx, r.cfg.Clock, r.cfg.ImagePullTimeout,
			fmt.Errorf("the pull did not finish within %s: %w", r.cfg.ImagePullTimeout, context.DeadlineExceeded))
		defer cancel()
	}
	if len(auths) == 0 {
		auths = []*runtimeapi.AuthConfig{nil}
	}
	var errs []error
	for _, auth := range auths {
		_, err := r.is.PullImage(ctx, spec, auth, sandboxConfig)
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

// dockerConfigEntry is one registry's credentials in a docker config.
type dockerConfigEntry struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// pullAuths returns the credentials of the pod's image pull secrets that
// match the image's registry, in the order the secrets are listed. A
// secret that cannot be read is skipped with an event, as the kubelet
// does; one that is malformed is an error naming the secret and field.
func (r *Runtime) pullAuths(ctx context.Context, pod *v1.Pod, named reference.Named) ([]*runtimeapi.AuthConfig, error) {
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return nil, nil
	}
	domain := normalizeRegistry(reference.Domain(named))
	repoPath := reference.Path(named)
	var out []*runtimeapi.AuthConfig
	for i, ref := range pod.Spec.ImagePullSecrets {
		field := fmt.Sprintf("spec.imagePullSecrets[%d] (%s)", i, ref.Name)
		if r.cfg.Objects == nil {
			r.cfg.Events(pod, v1.EventTypeWarning, reasonFailedToGetSecret, field+": no object source is configured")
			continue
		}
		secret, err := r.cfg.Objects.GetSecret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			r.cfg.Events(pod, v1.EventTypeWarning, reasonFailedToGetSecret, fmt.Sprintf("Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", ref.Name))
			continue
		}
		entries, err := parseDockerConfig(secret)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		for _, key := range slices.Sorted(maps.Keys(entries)) {
			host, prefix := splitRegistryKey(key)
			if !matchHost(host, domain) || (prefix != "" && !strings.HasPrefix(repoPath, prefix)) {
				continue
			}
			e := entries[key]
			auth := &runtimeapi.AuthConfig{
				Username:      e.Username,
				Password:      e.Password,
				ServerAddress: key,
				IdentityToken: e.IdentityToken,
				RegistryToken: e.RegistryToken,
			}
			if e.Auth != "" && e.Username == "" {
				raw, err := base64.StdEncoding.DecodeString(e.Auth)
				user, pass, ok := strings.Cut(string(raw), ":")
				if err != nil || !ok {
					return nil, fmt.Errorf("%s: auths[%q].auth: not base64 of user:password", field, key)
				}
				auth.Username, auth.Password = user, pass
			}
			out = append(out, auth)
		}
	}
	return out, nil
}

func parseDockerConfig(s *v1.Secret) (map[string]dockerConfigEntry, error) {
	switch s.Type {
	case v1.SecretTypeDockerConfigJson:
		data, ok := s.Data[v1.DockerConfigJsonKey]
		if !ok {
			return nil, fmt.Errorf("data[%s]: missing", v1.DockerConfigJsonKey)
		}
		var cfg struct {
			Auths map[string]dockerConfigEntry `json:"auths"`
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("data[%s]: %v", v1.DockerConfigJsonKey, err)
		}
		return cfg.Auths, nil
	case v1.SecretTypeDockercfg:
		data, ok := s.Data[v1.DockerConfigKey]
		if !ok {
			return nil, fmt.Errorf("data[%s]: missing", v1.DockerConfigKey)
		}
		var cfg map[string]dockerConfigEntry
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("data[%s]: %v", v1.DockerConfigKey, err)
		}
		return cfg, nil
	}
	return nil, fmt.Errorf("type %q: want %s or %s", s.Type, v1.SecretTypeDockerConfigJson, v1.SecretTypeDockercfg)
}

// splitRegistryKey turns a docker config key ("https://index.docker.io/v1/",
// "registry.example.com/team") into a registry host and a repository path
// prefix.
func splitRegistryKey(key string) (host, prefix string) {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, prefix, _ = strings.Cut(key, "/")
	host = normalizeRegistry(host)
	prefix = strings.Trim(prefix, "/")
	if host == dockerHubDomain && (prefix == "v1" || prefix == "v2") {
		prefix = ""
	}
	return host, prefix
}

func normalizeRegistry(host string) string {
	switch host {
	case legacyDockerHubIndexHost, "registry-1.docker.io":
		return dockerHubDomain
	}
	return host
}

// matchHost matches a registry host against a config key's host, which
// may hold globs (*.example.com), as the kubelet's keyring does.
func matchHost(pattern, host string) bool {
	if pattern == host {
		return true
	}
	pp, hp := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(pp) != len(hp) {
		return false
	}
	for i := range pp {
		if ok, _ := path.Match(pp[i], hp[i]); !ok {
			return false
		}
	}
	return true
}

func isNotFoundObject(err error) bool { return errors.Is(err, runtime.ErrNotFound) }
