// Package probes runs liveness, readiness and startup probes the way the
// kubelet does (pkg/kubelet/prober, pkg/probe).
//
// Manager runs one goroutine per container per probe type, and no more,
// for the pods given to AddPod; RemovePod and CleanupPods stop them. Each
// worker reads the container's ID, state and start time from the pod
// status (Config.Status) and applies the kubelet's rules:
//   - the first probe comes after a random part of the period, so a
//     thousand pods do not probe in lock step, and not before
//     initialDelaySeconds after the container started;
//   - before any probe, readiness reports Failure, liveness Success and
//     startup Unknown;
//   - a result changes only after failureThreshold failures or
//     successThreshold successes in a row;
//   - liveness and readiness do nothing until the startup probe has
//     succeeded; the startup probe stops once it has;
//   - after a liveness or startup failure the worker holds until the
//     container restarts (a new container ID), then starts afresh;
//   - a container that is not running reports Failure.
//
// Every change of result goes out on Updates; the agent turns readiness
// and startup into the container's ready and started fields and the pod's
// Ready conditions, and a liveness or startup failure into a restart (the
// runtime reads Liveness and Startup). Each failed probe records an
// Unhealthy event naming the container, the probe and its output; probes
// that cannot work as written (no handler, two handlers, a timeout longer
// than the period) get a ProbeWarning event, and fail with a message
// instead of crashing the worker. A Prober that panics is logged with its
// stack; that round has no result and the worker goes on.
//
// Handlers is the default Prober: exec through the runtime's ExecSync
// with the probe's timeout; HTTP GET with the scheme, host (the pod IP by
// default), port by number or name, path and headers, User-Agent
// kube-probe/1.37, redirects followed only to the same host (a redirect
// elsewhere ends the probe as a success, as in the kubelet), at most
// 10 KiB of body read, HTTPS without certificate checks; TCP connect; and
// the gRPC grpc.health.v1 Check with an optional service name.
//
// Metrics: prober_probe_total and prober_probe_duration_seconds, the
// kubelet's names and labels except pod_uid, which nodekit keeps out of
// label values.
package probes
