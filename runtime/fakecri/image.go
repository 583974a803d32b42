package fakecri

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Pod annotations that script image pulls made for that pod (the CRI
// passes the pod's sandbox config with each pull).
const (
	// AnnotationPullDelay delays every pull for the pod (a Go duration).
	AnnotationPullDelay = "fakecri.nodekit.io/pull-delay"
	// AnnotationPullError makes every pull for the pod fail with this
	// message (code Unknown, as a registry error in containerd).
	AnnotationPullError = "fakecri.nodekit.io/pull-error"
)

// fakeImageSize is the size every fake image reports.
const fakeImageSize = 4 << 20

type image struct {
	id   string // "sha256:<hex>"
	tags []string
	repo string // repository name, for digests
}

func (i *image) name() string {
	if len(i.tags) > 0 {
		return i.tags[0]
	}
	return i.id
}

func (i *image) api() *runtimeapi.Image {
	return &runtimeapi.Image{
		Id:          i.id,
		RepoTags:    append([]string(nil), i.tags...),
		RepoDigests: []string{i.repo + "@" + i.id},
		Size:        fakeImageSize,
		Spec:        &runtimeapi.ImageSpec{Image: i.id},
	}
}

// PullBehavior scripts pulls of one image.
type PullBehavior struct {
	// Delay is how long a pull takes.
	Delay time.Duration
	// Err, when not nil, is what the pull fails with.
	Err error
}

// SetPull scripts pulls of ref (normalized, so "busybox" and
// "docker.io/library/busybox:latest" are the same image).
func (r *Runtime) SetPull(ref string, b PullBehavior) error {
	n, err := normalizeImage(ref)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pulls[n] = b
	return nil
}

// normalizeImage returns the fully qualified name of ref, with the default
// registry and tag, as containerd stores it. A digest reference keeps its
// digest.
func normalizeImage(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", status.Errorf(codes.InvalidArgument, "failed to parse image reference %q: %v", ref, err)
	}
	return reference.TagNameOnly(named).String(), nil
}

func imageID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// addImage stores an image by name. The caller holds r.mu or owns r.
func (r *Runtime) addImage(ref string) (*image, error) {
	n, err := normalizeImage(ref)
	if err != nil {
		return nil, err
	}
	id := imageID(n)
	if img, ok := r.images[id]; ok {
		return img, nil
	}
	repo := n
	if named, err := reference.ParseNormalizedNamed(n); err == nil {
		repo = named.Name()
	}
	img := &image{id: id, tags: []string{n}, repo: repo}
	r.images[id] = img
	return img, nil
}

// resolveImageLocked finds a present image by name, ID or ID prefix.
func (r *Runtime) resolveImageLocked(ref string) *image {
	if n, err := normalizeImage(ref); err == nil {
		if img, ok := r.images[imageID(n)]; ok {
			return img
		}
	}
	id := ref
	if !strings.HasPrefix(id, "sha256:") {
		id = "sha256:" + id
	}
	if img, ok := r.images[id]; ok {
		return img
	}
	return nil
}

// ListImages implements ImageManagerService.
func (r *Runtime) ListImages(_ context.Context, f *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ListImages"); err != nil {
		return nil, err
	}
	var want *image
	if ref := f.GetImage().GetImage(); ref != "" {
		if want = r.resolveImageLocked(ref); want == nil {
			return nil, nil
		}
	}
	var out []*runtimeapi.Image
	for _, id := range slices.Sorted(maps.Keys(r.images)) {
		if want == nil || want.id == id {
			out = append(out, r.images[id].api())
		}
	}
	return out, nil
}

// ImageStatus implements ImageManagerService. An image that is not present
// yields a response with a nil Image, not an error, as in the CRI.
func (r *Runtime) ImageStatus(_ context.Context, spec *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ImageStatus"); err != nil {
		return nil, err
	}
	img := r.resolveImageLocked(spec.GetImage())
	if img == nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	resp := &runtimeapi.ImageStatusResponse{Image: img.api()}
	if verbose {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"id":%q}`, img.id)}
	}
	return resp, nil
}

// PullImage implements ImageManagerService. It takes the scripted delay
// (SetPull, or the pod's AnnotationPullDelay), then fails as scripted,
// fails with NotFound for an image outside Config.Registry, or stores the
// image and returns its ID.
func (r *Runtime) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, _ *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	if err := r.enter("PullImage"); err != nil {
		r.mu.Unlock()
		return "", err
	}
	ref := spec.GetImage()
	n, err := normalizeImage(ref)
	if err != nil {
		r.mu.Unlock()
		return "", err
	}
	b := r.pulls[n]
	r.mu.Unlock()

	if s := sb.GetAnnotations()[AnnotationPullDelay]; s != "" {
		d, err := parseDuration(s)
		if err != nil {
			return "", status.Errorf(codes.InvalidArgument, "pod annotation %s=%q: %v", AnnotationPullDelay, s, err)
		}
		b.Delay = d
	}
	if msg := sb.GetAnnotations()[AnnotationPullError]; msg != "" {
		b.Err = status.Errorf(codes.Unknown, "failed to pull and unpack image %q: %s", n, msg)
	}
	if b.Delay > 0 {
		t := r.clock.NewTimer(b.Delay)
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
			return "", status.FromContextError(ctx.Err()).Err()
		}
	}
	if b.Err != nil {
		return "", b.Err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.registry != nil && !r.registry[n] {
		return "", status.Errorf(codes.NotFound, "failed to pull and unpack image %q: failed to resolve reference %q: %q: not found", n, n, n)
	}
	img, err := r.addImage(n)
	if err != nil {
		return "", err
	}
	return img.id, nil
}

// RemoveImage implements ImageManagerService. Removing an image that is not
// present succeeds.
func (r *Runtime) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("RemoveImage"); err != nil {
		return err
	}
	if img := r.resolveImageLocked(spec.GetImage()); img != nil {
		delete(r.images, img.id)
	}
	return nil
}

// ImageFsInfo implements ImageManagerService: the images, 4Mi and an
// inode each, and the containers' writable layers, on one filesystem, or
// on two with Disks.SplitLayers.
func (r *Runtime) ImageFsInfo(_ context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ImageFsInfo"); err != nil {
		return nil, err
	}
	return r.imageFsInfoLocked(), nil
}

func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
