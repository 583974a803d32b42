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
//     succeeded (or its worker has stopped); the startup probe stops once
//     it has decided;
//   - after a liveness failure or a startup verdict the worker holds until
//     the container restarts (a new container ID), then starts afresh;
//   - a container that is not running reports Failure; a Prober's Unknown
//     counts as Failure; a probe that could not be run (the Prober
//     returned an error) records an Unhealthy event and is thrown away,
//     counting towards no threshold.
//
// A worker stops by itself, and forgets its result, as the kubelet's
// does: when the pod's phase is Failed or Succeeded (checked before
// anything else, so such a pod is never probed); when its container has
// terminated and will not be started again (its restartPolicyRules on
// the exit code, else its own restartPolicy, else the pod's: Never, or
// OnFailure after exit code 0; a sidecar's Always wins over the pod's
// policy; and no restart of all the pod's containers, a restart rule with
// the action RestartAllContainers, shows in the pod's status as under way
// or about to start), after reporting Failure; and, for liveness and startup only,
// when the pod has a deletion timestamp, after reporting Success so the
// shutdown is quiet (readiness goes on probing the terminating pod).
// Unlike the kubelet, which creates the worker again on the next sync
// (and it stops again), a stopped worker stays stopped until RemovePod
// or CleanupPods forgets the pod. StopLivenessAndStartup stops a pod's
// liveness and startup workers before it is killed, as the kubelet does,
// and leaves readiness probing through the grace period.
//
// Trigger makes a worker probe at once instead of at its next period,
// the kubelet's manual trigger: the agent uses it on each sync for the
// readiness probes of started containers that are not ready, so a
// container is found ready as soon as it starts or its startup probe
// succeeds, not up to a period later. The worker's rules still apply and
// its period's grid does not move.
//
// Every change of result goes out on Updates; the agent turns readiness
// and startup into the container's ready and started fields and the pod's
// Ready conditions, and a liveness or startup failure into a restart (the
// runtime reads Liveness and Startup). Each failed probe records an
// Unhealthy event naming the container, the probe and its output; probes
// that cannot work as written (no handler, two handlers, a timeout longer
// than the period) get a ProbeWarning event, and fail with a message
// instead of crashing the worker. A Prober that panics is logged with its
// stack and counted in nodekit_prober_panics_total; that round has no
// result and the worker goes on.
//
// Handlers is the default Prober: exec through the runtime's ExecSync
// with the probe's timeout; HTTP GET with the scheme, host (the pod IP by
// default), port by number or name, path and headers, User-Agent
// kube-probe/1.37, redirects followed only to the same host name (a
// redirect elsewhere, or any 3xx answer left unfollowed, ends the probe as
// a Warning: a success with a ProbeWarning event, as in the kubelet), at most
// 10 KiB of body read, HTTPS without certificate checks; TCP connect; and
// the gRPC grpc.health.v1 Check with an optional service name.
//
// Metrics: prober_probe_total and prober_probe_duration_seconds, the
// kubelet's names, types and labels except pod_uid, which nodekit keeps
// out of label values; the histogram has the kubelet's buckets (the
// Prometheus defaults, 5ms to 10s). The agent serves them on the node
// server's /metrics/probes.
package probes
