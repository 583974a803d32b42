// Package images is the image manager of runtime/cri: it makes sure a
// container's image is present before the container is created, as the
// kubelet's image manager (pkg/kubelet/images) does.
//
// Manager.EnsureImage, given a pod and one of its containers:
//
//   - applies the pull policy, defaulted as the API server does: Always
//     for a ":latest" tag or no tag, IfNotPresent for any other tag or a
//     digest, unless the spec says. IfNotPresent and Never ask the
//     runtime's ImageStatus first; Never fails with ErrImageNeverPull
//     when the image is absent. A missing or unparsable image name is
//     InvalidImageName.
//   - turns the pod's imagePullSecrets (types kubernetes.io/dockerconfigjson
//     and kubernetes.io/dockercfg, read through Config.Secrets) into CRI
//     credentials: every entry whose registry host matches the image's
//     (globs such as *.example.com allowed, index.docker.io and
//     registry-1.docker.io counted as docker.io) and whose path, if any,
//     prefixes the image's repository, in the order the secrets are
//     listed and by key within one. A credential's serverAddress is the
//     entry's own "serveraddress" (usually none), never the key, as the
//     kubelet sends it: containerd drops credentials whose serverAddress
//     does not parse to the pulled host, which a key with a port
//     ("localhost:5000") never does. The pull tries them in turn, then
//     gives up; with none it pulls anonymously. A secret that cannot be
//     read is skipped with a FailedToRetrieveImagePullSecret event; one
//     that is malformed fails the pull with an error naming the secret
//     and the field.
//   - keeps a back-off per pod and image: after a failed pull the next
//     one waits 10 s, doubling up to 5 min, and a request in between
//     fails at once with ImagePullBackOff without calling the runtime;
//     a failure after twice the maximum without one starts afresh
//     (Config.BackOff).
//   - serializes pulls (one at a time, the kubelet's default), or runs up
//     to Config.MaxParallelPulls at once.
//   - ends a pull when the caller's context does, and cuts it off after
//     Config.PullTimeout (30 min by default), counted from when it gets
//     its slot, with ErrImagePull and an error saying so.
//   - records the kubelet's events: Pulling, Pulled (with the time it
//     took), Failed, BackOff, ErrImageNeverPull.
//
// GC is the kubelet's image garbage collector: every 5 min (Run), when
// the image filesystem is at HighThresholdPercent (85) or more, it
// removes unused images, least recently used first (never-used ones
// before any used one, then by first sight), until usage is down to
// LowThresholdPercent (80); DeleteUnused removes every unused image, for
// the eviction manager under disk pressure. An image used by any
// container the runtime has, running or exited, a pinned image, and one
// first seen less than MinAge (2 min) ago are kept. First-sight and
// last-use times are the collector's own, so they restart with the
// process, as the kubelet's do. A collection that cannot free enough
// says how much it tried and found.
//
// It returns the image as the runtime describes it, and on failure the
// container's waiting reason with the error. Errors of the image service
// are classified with criclient.Wrap, so errors.Is(err,
// runtime.ErrNotFound) and the like work whatever the service.
//
// # Where it differs from the kubelet, and why
//
//   - Pulls have a total deadline (Config.PullTimeout): the kubelet has
//     none, and one hung pull would hold the node's only pull slot for
//     good.
//   - No credential providers (the kubelet's exec plugins) and no
//     node-wide docker config: credentials come from the pod's pull
//     secrets only.
//   - No image garbage collection, and no "ensure secret pulled images"
//     check of credentials for images already present.
//
// # Swapping it
//
// runtime/cri consumes it through its small cri.ImageManager interface
// (EnsureImage alone); set cri.Config.Images to replace it, for instance
// with a manager that verifies signatures or pulls through a mirror.
//
// # Usage
//
//	m, err := images.New(images.Config{Service: imageService, Secrets: objects})
//	img, reason, err := m.EnsureImage(ctx, pod, &pod.Spec.Containers[0], "spec.containers[app]", sandboxConfig)
//	if err != nil {
//		// reason is ErrImagePull, ImagePullBackOff, ErrImageNeverPull or InvalidImageName
//	}
//
// A Manager is safe for concurrent use; it starts one goroutine per pull
// for the pull deadline, which ends with the pull.
package images
