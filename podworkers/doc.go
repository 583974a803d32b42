// Package podworkers runs one serialized worker per pod UID with the
// kubelet's pod lifecycle (pkg/kubelet/pod_workers.go):
//
//	syncing ──(kill, deletion, or a terminal phase)──▶ terminating ──▶ terminated
//
// UpdatePod never blocks: it hands the update to the pod's goroutine. An
// update that arrives while a sync runs replaces any pending one, so the
// next sync sees the latest spec (a periodic SyncPodSync never replaces a
// more important pending update). Each sync first reads the runtime's
// view from the StatusCache with GetNewerThan(the end of its previous
// step), so a worker never acts on a view that may predate its own last
// action (the kubelet's lastSyncTime).
//
// Rules kept from the kubelet:
//   - once termination is requested a pod never syncs again, and its
//     worker never starts again; a SyncPodCreate for the same UID (a
//     static pod's manifest removed and put back) is remembered, and once
//     the worker finished SyncKnownPods forgets it, so that the caller
//     starts the pod afresh;
//   - grace periods only shorten (the kill override, else the deletion
//     grace period, else the spec's, else 30 s);
//   - a pod whose sync reports a terminal phase is terminated;
//   - pods known only to the runtime (orphans) are terminated through
//     SyncTerminatingRuntimePod;
//   - only one static pod (annotation kubernetes.io/config.source other
//     than "api") per namespace/name runs: a replacement waits until its
//     predecessor terminated;
//   - SyncKnownPods terminates workers whose pods left the config and
//     forgets finished ones that are no longer desired or were created
//     again.
//
// A failed step is due again after BackOffPeriod (10 s), a successful
// sync after ResyncInterval (1 min); the sync loop asks Due for the pods to
// resync. Run starts the workers and, when ctx ends, waits for every one
// of them to return.
//
// # Usage
//
//	pw, err := podworkers.New(podworkers.Config{Handler: h, Cache: plegCache})
//	go pw.Run(ctx)
//	pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod})
package podworkers
