// Package cri connects nodekit to container runtimes through the CRI.
//
// It has two halves:
//
//   - Dial returns a *Client, a CRI v1 client over gRPC on a unix socket
//     that implements the standard k8s.io/cri-api/pkg/apis interfaces
//     (RuntimeService, ImageManagerService) with per-call timeouts, the
//     kubelet's 16 MiB message limit, a Version check at connect time, and
//     errors that name the call and the object and classify with errors.Is
//     (runtime.ErrNotFound, runtime.ErrUnavailable, ...).
//   - New returns a *Runtime, nodekit's pod-level runtime.Runtime on top of
//     any implementation of those interfaces: a *Client, an in-memory
//     *fakecri.Runtime, or cri-api's testing fakes.
//
// # Pod sync
//
// SyncPod follows the kubelet's kuberuntime manager. ComputePodActions, a
// pure function of the pod spec and the observed runtime.PodStatus,
// decides what to do (see its doc for the rules: sandbox (re)creation and
// attempts, init containers in order, restart policies, spec-hash
// changes, unknown states); SyncPod then pulls images by pull policy,
// creates and starts containers, and reports each step with the kubelet's
// waiting reason on failure (ErrImagePull, ErrImageNeverPull,
// InvalidImageName, CreateContainerConfigError, CreateContainerError,
// RunContainerError, CreatePodSandboxError).
//
// Sandboxes and containers carry the kubelet's labels and annotations
// (io.kubernetes.pod.name, io.kubernetes.container.hash, ...) and logs go
// to <PodLogsDir>/<namespace>_<name>_<uid>/<container>/<restart>.log, so
// crictl and other CRI tools recognise the pods, and a Runtime adopts
// what an earlier one (or a kubelet) created: it keeps no state of its
// own.
//
// KillPod stops containers in parallel with the pod's grace period (the
// deletion grace period, else the spec's, else 30 s; at least 2 s unless
// an override says otherwise), then stops the sandboxes.
//
// # Not yet done here
//
// This is the first cut of the runtime: there is no restart back-off
// (CrashLoopBackOff) or image-pull back-off, no sidecar (restartable init)
// or ephemeral containers, no probe-driven restarts, env only from plain
// values (valueFrom and envFrom fail with CreateContainerConfigError
// naming the field), no $(VAR) expansion, resources, capabilities,
// seccomp, DNS config, lifecycle hooks, pull secrets or garbage
// collection. Each is a failure with a clear reason, never a silent
// difference.
//
// # Why not k8s.io/cri-client
//
// The upstream CRI client pulls in component-base, OpenTelemetry and
// klog's global logger, and returns bare gRPC status errors; Client is a
// thin layer over the generated gRPC stubs that does neither.
//
// # Usage
//
//	client, err := cri.Dial(ctx, "unix:///run/containerd/containerd.sock")
//	if err != nil { ... }
//	defer client.Close(ctx)
//	rt, err := cri.New(cri.Config{RuntimeService: client, ImageService: client})
//	status, err := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
//	result := rt.SyncPod(ctx, pod, status)
package cri
