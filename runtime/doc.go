// Package runtime is the pod-level container runtime seam of nodekit: the
// Runtime interface the agent drives, and the types that describe what a
// runtime observed about pods, sandboxes and containers.
//
// The package holds types and interfaces only. It imports no gRPC and no CRI
// client, so an embedder can implement Runtime for an environment that has no
// CRI at all (a microVM manager, a WASM host) and still use every other
// nodekit part.
//
// # Implementations
//
//   - runtime/cri: Runtime on top of the standard CRI service interfaces
//     (k8s.io/cri-api/pkg/apis), so it works over a CRI socket
//     (runtime/criclient: criclient.Dial("unix:///run/containerd/containerd.sock")),
//     over the in-memory runtime/fakecri, or over cri-api's own testing fakes.
//   - runtime/fakecri: an in-memory CRI runtime; wrap it with runtime/cri to
//     get a Runtime.
//
// # What the types mean
//
// A Pod is the runtime's grouping of sandboxes and containers that carry one
// pod UID, as returned by Runtime.GetPods: a cheap, list-level view. A
// PodStatus is the detailed observation of one pod at one instant, returned by
// Runtime.GetPodStatus: every sandbox (newest first) and every container
// (newest first, including exited ones kept for restart counting and logs).
// Both are snapshots; the runtime never mutates a value after returning it,
// and callers own what they receive. The one exception is the optional
// PodVisitor, whose pods are lent to a function for the length of the call
// and reused by the next list, so that a caller listing every second does
// not allocate every pod anew (Pod.Clone copies one to keep).
//
// # Shared types
//
// ProbeResult and EventFunc are defined here, once, because several parts
// exchange them: probes.Result and cri.ProbeResult are aliases of
// ProbeResult (the probes produce results, runtime/cri restarts on them),
// and probes.EventFunc, podsource.EventFunc and cri.EventFunc are aliases
// of EventFunc, so one function records the events of every part.
//
// # Errors
//
// Implementations wrap their failures so that callers can classify them with
// errors.Is against the sentinel errors of this package (ErrNotFound,
// ErrInvalidArgument, ErrUnavailable, ...), whatever transport sits
// underneath.
package runtime
