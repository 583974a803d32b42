// Package pleg is the pod lifecycle event generator: it watches the
// runtime, keeps a Cache of every pod's latest runtime.PodStatus, and
// emits an Event for each container or sandbox that started, died, was
// removed or changed.
//
// Generic relists: every RelistPeriod (1 s) it calls Runtime.GetPods
// once, compares every container's and sandbox's state with the previous
// relist (the created state counts as unknown, as in the kubelet), and
// calls Runtime.GetPodStatus only for pods that changed, appeared, or
// whose last inspection failed. A relist of unchanged pods costs the
// runtime's list calls and nothing more. After each relist the cache's
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
// # Usage
//
//	cache := pleg.NewCache()
//	gen, err := pleg.NewGeneric(pleg.Config{Runtime: rt, Cache: cache})
//	go gen.Run(ctx)
//	for ev := range gen.Watch() { ... }
//	status, err := cache.GetNewerThan(ctx, uid, lastSync)
package pleg
