package eviction

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/internal/podutil"
)

// The kubelet's eviction_signal labels for local storage limit evictions.
const (
	signalEmptyDirLimit         = "emptydirfs.limit"
	signalPodEphemeralLimit     = "ephemeralpodfs.limit"
	signalContainerEphemeralLim = "ephemeralcontainerfs.limit"
)

// localStorageEviction evicts, at once, every active pod that uses more
// local storage than it is allowed: an emptyDir volume above its
// sizeLimit, the pod's ephemeral storage above the sum of its
// containers' limits, or a container's logs and writable layer above its
// own limit. Checks go in that order; a pod is evicted for the first it
// fails. It returns the pods evicted.
func (m *Manager) localStorageEviction(ctx context.Context, pods []*v1.Pod, stats statsFunc) []*v1.Pod {
	var evicted []*v1.Pod
	for _, p := range pods {
		ps, ok := stats(p)
		if !ok {
			continue
		}
		msg, signal := overLocalStorageLimit(p, ps, m.cfg.DedicatedImageFs)
		if msg == "" {
			continue
		}
		if podutil.IsCritical(p) {
			m.log.Info("cannot evict a critical pod over its local storage limit", "pod", podutil.FullName(p), "podUID", p.UID, "message", msg)
			continue
		}
		m.cfg.Events(p, v1.EventTypeWarning, Reason, msg)
		m.log.Info("evicting pod", "pod", podutil.FullName(p), "podUID", p.UID, "message", msg)
		// As in the kubelet, a pod whose kill failed still counts as
		// evicted in this pass: its limit is what it broke, and the next
		// pass will find it again.
		if err := m.cfg.Kill(ctx, p, Eviction{GracePeriod: 1, Message: msg}); err != nil {
			m.log.Error(err, "evicting pod failed", "pod", podutil.FullName(p), "podUID", p.UID)
		}
		m.evictions.WithLabelValues(signal).Inc()
		evicted = append(evicted, p)
	}
	return evicted
}

// overLocalStorageLimit returns the eviction message and metric signal of
// the first local storage limit pod p is over according to ps, or "".
func overLocalStorageLimit(p *v1.Pod, ps statsapi.PodStats, dedicatedImageFs bool) (string, string) {
	if !hasLocalStorageLimit(p) {
		return "", ""
	}
	// emptyDir volumes over their sizeLimit.
	for _, vol := range p.Spec.Volumes {
		ed := vol.EmptyDir
		if ed == nil || ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0 {
			continue
		}
		for _, vs := range ps.VolumeStats {
			if vs.Name != vol.Name || vs.UsedBytes == nil {
				continue
			}
			if resource.NewQuantity(int64(*vs.UsedBytes), resource.BinarySI).Cmp(*ed.SizeLimit) > 0 {
				return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", vol.Name, ed.SizeLimit.String()), signalEmptyDirLimit
			}
			break
		}
	}

	// The pod's total against the sum of its containers' limits (init
	// containers and sidecars counted as the scheduler counts them).
	if limit, ok := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]; ok {
		total := resource.NewQuantity(0, resource.BinarySI)
		if ps.EphemeralStorage != nil && ps.EphemeralStorage.UsedBytes != nil {
			total = resource.NewQuantity(int64(*ps.EphemeralStorage.UsedBytes), resource.BinarySI)
		}
		if total.Cmp(limit) > 0 {
			return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", limit.String()), signalPodEphemeralLimit
		}
	}

	// Each container (and sidecar) against its own limit: its logs, and
	// its writable layer unless that lives on a dedicated image
	// filesystem.
	limits := map[string]resource.Quantity{}
	add := func(c *v1.Container) {
		if l, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok && l.Value() != 0 {
			limits[c.Name] = l
		}
	}
	for i := range p.Spec.Containers {
		add(&p.Spec.Containers[i])
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		if podutil.IsRestartableInit(c) {
			add(c)
		}
	}
	for _, cs := range ps.Containers {
		limit, ok := limits[cs.Name]
		if !ok {
			continue
		}
		use := fsUsed(cs.Logs)
		if !dedicatedImageFs {
			use.Add(*fsUsed(cs.Rootfs))
		}
		if use.Cmp(limit) > 0 {
			return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", cs.Name, limit.String()), signalContainerEphemeralLim
		}
	}
	return "", ""
}

// hasLocalStorageLimit reports whether the pod sets any limit the local
// storage checks enforce: an emptyDir sizeLimit or a container's (or
// init container's) ephemeral-storage limit. Most pods set none, and
// are skipped at no cost.
func hasLocalStorageLimit(p *v1.Pod) bool {
	for i := range p.Spec.Volumes {
		if ed := p.Spec.Volumes[i].EmptyDir; ed != nil && ed.SizeLimit != nil {
			return true
		}
	}
	for _, cs := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			if _, ok := cs[i].Resources.Limits[v1.ResourceEphemeralStorage]; ok {
				return true
			}
		}
	}
	return false
}

// fsUsed is the bytes used on fs, 0 when unknown.
func fsUsed(fs *statsapi.FsStats) *resource.Quantity {
	if fs == nil || fs.UsedBytes == nil {
		return resource.NewQuantity(0, resource.BinarySI)
	}
	return resource.NewQuantity(int64(*fs.UsedBytes), resource.BinarySI)
}
