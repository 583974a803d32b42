package cri

import (
	"context"
	"fmt"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
// its pull policy and returns the image's ID. On failure it also returns
// the waiting reason.
func (r *Runtime) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxConfig *runtimeapi.PodSandboxConfig) (string, string, error) {
	if c.Image == "" {
		return "", ReasonInvalidImageName, fmt.Errorf("spec.containers[%s].image: must not be empty", c.Name)
	}
	named, err := reference.ParseNormalizedNamed(c.Image)
	if err != nil {
		return "", ReasonInvalidImageName, fmt.Errorf("spec.containers[%s].image: invalid image name %q: %v", c.Name, c.Image, err)
	}
	spec := &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image}
	policy := pullPolicy(c, named)
	if policy != v1.PullAlways {
		st, err := r.is.ImageStatus(ctx, spec, false)
		if err != nil {
			return "", ReasonErrImagePull, fmt.Errorf("image status %q: %w", c.Image, wrap("ImageStatus", c.Image, err))
		}
		if img := st.GetImage(); img != nil {
			return img.GetId(), "", nil
		}
		if policy == v1.PullNever {
			return "", ReasonErrImageNeverPull, fmt.Errorf("container image %q is not present with pull policy of Never", c.Image)
		}
	}
	ref, err := r.is.PullImage(ctx, spec, nil, sandboxConfig)
	if err != nil {
		return "", ReasonErrImagePull, fmt.Errorf("pull image %q: %w", c.Image, wrap("PullImage", c.Image, err))
	}
	// The kubelet creates containers from the image's ID, so a tag that
	// moves later does not change what a restart runs.
	st, err := r.is.ImageStatus(ctx, spec, false)
	if err == nil && st.GetImage() != nil {
		return st.GetImage().GetId(), "", nil
	}
	return ref, "", nil
}
