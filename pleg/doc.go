// Package pleg is the pod lifecycle event generator: it watches the
// runtime, keeps a Cache of every pod's latest runtime.PodStatus, and
// emits an Event for each container or sandbox that started, died, was
// removed or changed.
//
// Generic relists: every RelistPeriod (1 s) it calls Runtime.GetPods
// once (VisitPods when the runtime is a runtime.PodVisitor, as
// runtime/cri is, so that the list is made in memory the runtime reuses),
// compares every container's and sandbox's state with the previous
// relist (the created state counts as unknown, as in the kubelet), and
// calls Runtime.GetPodStatus only for pods that changed, appeared, or
// whose last inspection failed. A relist of unchanged pods costs the
// runtime's list calls and nothing more: it builds its records of them in
// the map of the relist before last, and allocates nothing per pod
// (BenchmarkRelistUnchanged: 1000 pods, 4 allocations and 120 to 250 bytes a
// relist, the first relist's maps spread over the runs, where a new
// map took 148 kB). After each relist the cache's
// global timestamp moves on, so Cache.GetNewerThan unblocks for every
// pod, changed or not.
//
// Healthy fails when no relist has completed for RelistThreshold (3 min),
// the kubelet's PLEG health check. The Watch channel has a fixed buffer;
// when it is full the generator waits for the reader rather than drop
// events, unlike the kubelet: a dropped event leaves its pod unsynced
// until the next periodic resync, which at a thousand pods starting at
// once delayed most of them by a minute. Events still unsent when the
// context ends are counted in kubelet_pleg_discard_events. Metrics use the kubelet's names
// (kubelet_pleg_relist_duration_seconds, ..._interval_seconds,
// kubelet_pleg_last_seen_seconds) and go to the Registerer in Config.
//
// A panic in a runtime call (the list, an inspection, the event stream) is
// that call's error, as a failure would be: logged with its stack and
// counted in nodekit_pleg_runtime_panics_total, and the relist, the pod's
// retry and the agent go on (TestRuntimePanicsAreTheCallsErrors).
//
// Evented follows the CRI container event stream (GetContainerEvents):
// each event makes it inspect that pod alone, so changes are seen within
// milliseconds, and an idle node costs no wake-up but a safety relist.
// It relists at start and every 5 minutes as a safety net, and when the
// runtime refuses the stream (containerd 1.6) or the stream breaks it
// relists every RelistPeriod and tries the stream again every 10 s. The
// stream counts as up (Streaming) only once the runtime has accepted the
// subscription (the streamer's established callback, or a first event)
// and has not refused it for 100 ms: over gRPC the subscription is sent
// before the runtime answers. Until then the generator relists every
// RelistPeriod; then it relists once, and once more RelistPeriod later
// (or at the first event, which shows the subscription in place) before
// the stream counts as up, so that what changed before the subscription
// is not missed even when the runtime takes up to RelistPeriod to put it
// in place. Measured with
// hack/bench-agent.sh on fakecri over a unix socket on a shared 2-core
// machine, the agent idles at about 0.09% of a core and 10 wake-ups a
// second with 100 pods (generic: 0.24% and 44), 0.47% and 14 with 1000
// (generic: 1.35% and 138).
//
// # Coalescing
//
// A CRI event carries the status of every container of its pod, so a pod
// with 10,000 containers sends 10,000 events of 10,000 statuses each as
// it starts. Evented keeps none of them: a goroutine reads the stream
// into a queue of pod UIDs (with the pod's name and namespace) and drops
// each event at once. A pod is queued once however many events name it;
// pods are inspected one at a time in the order of their first event
// since they were last taken, and an event arriving during a pod's
// inspection queues it again. The queue's size is bounded by the number
// of pods, and a slow inspection never holds up the stream. The events
// Watch delivers are not the stream's: an inspection emits one per
// container or sandbox whose state differs from what was last seen of
// the pod (the relist's rules), so events that coalesced yield the net
// change. A pod whose successful inspection took d of 10 ms or more is
// not inspected again for 4d, at most 5 s (its events keep it queued,
// and it is inspected once that time has passed), so that
// a pod of thousands of containers, which sends an event per container
// change, costs the generator about a fifth of a core while it starts
// instead of all of it; smaller pods are never held back, and a failed
// inspection follows its own back-off instead. The evented generator is
// healthy while its loop turns: while streaming, Healthy fails once an
// inspection or relist has been under way for RelistThreshold, so an
// inspection stuck in the runtime fails it as a stuck relist does, and
// an idle generator stays healthy. Once its context ends it drains what
// the streamer still sends until the streamer returns, so a streamer that
// sends without watching its context does not block shutdown.
//
// # What the cache promises
//
// Cache.GetNewerThan(uid, t) returns once the pod's own observation, or
// the cache's global timestamp, is newer than t (the kubelet's rule). The
// relisting generator moves the global timestamp after each relist. The
// evented one, while streaming, moves it to now a second after a reader
// starts waiting and every second while one still waits (never while
// none does; the second leaves the events of what a pod worker just did
// the time to arrive), whatever is queued, and keeps it true with
// pending marks: as an event is received, the
// reader marks its pod in the cache with the event's arrival (the time
// read before the event, never later), and the global timestamp vouches
// for a marked pod only up to that time. The mark goes when an
// inspection that began after the event is recorded; an event arriving
// during the inspection leaves its own mark. Events and ticks are taken
// in turn on the reader's goroutine, so no event received before a tick
// is left unmarked by it. So a pod held back, queued or under
// inspection keeps only its own readers waiting, for its own
// inspection, and every other pod's readers are served on the next tick. A
// removal (Cache.Delete) wakes the pod's readers waiting for an
// observation older than it; they get an empty status. When the stream
// goes down the marks go too: the pods they name are inspected by the
// next relist, which moves the global timestamp only after.
//
// # Records and re-inspection
//
// Relists and evented inspections keep one record per pod: the states of
// its containers and sandboxes as last listed or inspected. A relist
// compares the list with it, so a safety relist reports only what
// changed since the last inspection, missing no removal the stream did
// not report and repeating none it did. A failed inspection (GetPodStatus)
// leaves its error in the cache beside the pod's last good status, and
// leaves the record as it was, so the inspection that succeeds reports
// every change since the last good one. Generic inspects such a pod
// again at every relist, changed or not, until an inspection succeeds or
// the pod is no longer listed (the kubelet's podsToReinspect). Evented
// inspects it again after 1 s, then 2 s, 4 s... up to 30 s
// (EventedConfig.InspectBackOff, InspectBackOffMax), or at once on a new
// event of the pod, until an
// inspection succeeds or finds nothing of the pod left, which removes it
// from the cache; this holds as well for a pod whose inspection failed
// in one of its own relists. When the stream breaks, the pods still
// queued or awaiting a retry are inspected by the next relist.
//
// The cost of one pod with 10,000 containers through the whole agent on
// fakecri is measured by "make bench-bigpod" (hack/bigpod).
//
// # Usage
//
//	cache := pleg.NewCache()
//	gen, err := pleg.NewGeneric(pleg.Config{Runtime: rt, Cache: cache})
//	go gen.Run(ctx)
//	for ev := range gen.Watch() { ... }
//	status, err := cache.GetNewerThan(ctx, uid, lastSync)
package pleg
