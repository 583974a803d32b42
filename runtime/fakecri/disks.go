package fakecri

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// DiskUsage is what a container holds on disk: its writable layer, kept
// until the container is removed, and its logs.
type DiskUsage struct {
	RootfsBytes, RootfsInodes uint64
	LogBytes, LogInodes       uint64
}

// Filesystem is a scripted filesystem: its size, and what files other
// than the runtime's images, writable layers and logs take of it.
type Filesystem struct {
	CapacityBytes, Inodes uint64
	UsedBytes, InodesUsed uint64
}

// Disks is the node's scripted disk layout. Each image takes 4Mi and an
// inode of the filesystem that holds images; each container, its
// DiskUsage of the filesystems that hold writable layers and logs.
type Disks struct {
	// Node is the node's filesystem (nodefs): the containers' logs, and
	// the images and writable layers unless Image holds them.
	Node Filesystem
	// Image, when set, is a filesystem of its own (imagefs) for the
	// images and, unless SplitLayers, the writable layers. Nil: both
	// are on Node.
	Image *Filesystem
	// SplitLayers keeps the writable layers on Node while the images are
	// on Image: the kubelet's split image filesystem. ImageFsInfo then
	// reports a container filesystem of its own.
	SplitLayers bool
}

// SetDisks scripts the node's filesystems, which DiskStats reports; it
// replaces what an earlier call set. Changing the figures between stats
// reads (a drop in Node's free space) drives disk pressure.
func (r *Runtime) SetDisks(d Disks) {
	if d.Image != nil {
		img := *d.Image
		d.Image = &img
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.disks = &d
}

// SetDiskUsage sets what an existing container holds on disk, as
// FAKECRI_ROOTFS_BYTES and the like script it at creation.
func (r *Runtime) SetDiskUsage(id string, u DiskUsage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		return err
	}
	c.behavior.Disk = u
	return nil
}

// splitLayers reports whether the writable layers are on a container
// filesystem apart from the images'.
func (r *Runtime) splitLayersLocked() bool {
	return r.disks != nil && r.disks.Image != nil && r.disks.SplitLayers
}

// imageFsInfoLocked is ImageFsInfo's answer: the images (and the
// writable layers, unless they are split off) on the image filesystem,
// and the container filesystem: the image one, or one of its own.
func (r *Runtime) imageFsInfoLocked() *runtimeapi.ImageFsInfoResponse {
	now := r.now().UnixNano()
	var layerBytes, layerInodes uint64
	for _, c := range r.containers {
		layerBytes += c.behavior.Disk.RootfsBytes
		layerInodes += c.behavior.Disk.RootfsInodes
	}
	usage := func(mount string, bytes, inodes uint64) *runtimeapi.FilesystemUsage {
		return &runtimeapi.FilesystemUsage{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: mount},
			UsedBytes:  &runtimeapi.UInt64Value{Value: bytes},
			InodesUsed: &runtimeapi.UInt64Value{Value: inodes},
		}
	}
	images, imageInodes := uint64(len(r.images))*fakeImageSize, uint64(len(r.images))
	if r.splitLayersLocked() {
		return &runtimeapi.ImageFsInfoResponse{
			ImageFilesystems:     []*runtimeapi.FilesystemUsage{usage("/var/lib/fakecri/images", images, imageInodes)},
			ContainerFilesystems: []*runtimeapi.FilesystemUsage{usage("/var/lib/fakecri/containers", layerBytes, layerInodes)},
		}
	}
	fs := usage("/var/lib/fakecri/images", images+layerBytes, imageInodes+layerInodes)
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{fs}, ContainerFilesystems: []*runtimeapi.FilesystemUsage{fs}}
}

// SummaryProvider gives a stats summary; server.CRIStats fits, and so
// does what DiskStats returns, which server.StatsProvider accepts.
type SummaryProvider interface {
	Summary(ctx context.Context) (*statsapi.Summary, error)
}

// DiskStats reports a base summary with the runtime's scripted disk
// figures filled in. Give it to the agent as its node server's stats to
// drive disk-pressure eviction on fakecri.
type DiskStats struct {
	r    *Runtime
	base SummaryProvider
}

// DiskStats returns base's summaries (server.CRIStats over this runtime)
// with the scripted disks filled in: with SetDisks called, the node's
// filesystem (node.fs), the image filesystem (node.runtime.imageFs) and
// the containers' (node.runtime.containerFs), each with its capacity,
// inodes, and what is used: the scripted other files plus the images,
// writable layers (dead containers' too, until removed) and logs it
// holds; and always each container's logs and, where base left them
// out, its writable layer and its pod's ephemeral storage (writable
// layers and logs). Figures come from the running container of that
// name in the pod, else the newest.
func (r *Runtime) DiskStats(base SummaryProvider) *DiskStats {
	return &DiskStats{r: r, base: base}
}

// Summary implements SummaryProvider. It blocks while base's does and
// returns base's error, wrapped. It does not mutate base's summary.
func (d *DiskStats) Summary(ctx context.Context) (*statsapi.Summary, error) {
	base, err := d.base.Summary(ctx)
	if err != nil {
		return nil, fmt.Errorf("fakecri: disk stats: %w", err)
	}
	fig := d.r.diskFigures()
	s := *base
	var node *statsapi.FsStats // nil: not scripted
	if fig.disks != nil {
		node = fig.nodeFs()
		s.Node.Fs = node
		var rt statsapi.RuntimeStats
		if base.Node.Runtime != nil {
			rt = *base.Node.Runtime
		}
		dev := node
		if fig.disks.Image != nil {
			dev = fsStats(fig.at, *fig.disks.Image, fig.imageFsUsed())
		}
		rt.ImageFs = withUsage(dev, fig.imageFsUsed())
		rt.ContainerFs = rt.ImageFs
		if fig.split {
			rt.ContainerFs = withUsage(node, fig.layers)
		}
		s.Node.Runtime = &rt
	}
	s.Pods = make([]statsapi.PodStats, len(base.Pods))
	for i, ps := range base.Pods {
		ps.Containers = append([]statsapi.ContainerStats(nil), ps.Containers...)
		var total used
		for j := range ps.Containers {
			cs := &ps.Containers[j]
			u := fig.usage[containerKey{ps.PodRef.UID, cs.Name}]
			cs.Logs = fsUsedStats(fig.at, used{u.LogBytes, u.LogInodes})
			if node != nil {
				cs.Logs = withUsage(node, used{u.LogBytes, u.LogInodes})
			}
			if cs.Rootfs == nil {
				cs.Rootfs = fsUsedStats(fig.at, used{u.RootfsBytes, u.RootfsInodes})
			}
			total = total.plus(used{value(cs.Rootfs.UsedBytes), value(cs.Rootfs.InodesUsed)}).plus(used{u.LogBytes, u.LogInodes})
		}
		if ps.EphemeralStorage == nil {
			ps.EphemeralStorage = fsUsedStats(fig.at, total)
		}
		s.Pods[i] = ps
	}
	return &s, nil
}

// used is bytes and inodes taken.
type used struct{ bytes, inodes uint64 }

func (u used) plus(v used) used { return used{u.bytes + v.bytes, u.inodes + v.inodes} }

type containerKey struct{ podUID, name string }

// diskFigures is one consistent reading of what the runtime holds.
type diskFigures struct {
	at                   metav1.Time
	disks                *Disks // nil: not scripted
	split                bool
	images, layers, logs used
	usage                map[containerKey]DiskUsage
}

func (r *Runtime) diskFigures() diskFigures {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := diskFigures{
		at:     metav1.NewTime(r.now()),
		split:  r.splitLayersLocked(),
		images: used{uint64(len(r.images)) * fakeImageSize, uint64(len(r.images))},
		usage:  make(map[containerKey]DiskUsage, len(r.containers)),
	}
	if r.disks != nil {
		d := *r.disks
		f.disks = &d
	}
	chosen := make(map[containerKey]*container, len(r.containers))
	for _, c := range r.containers {
		u := c.behavior.Disk
		f.layers = f.layers.plus(used{u.RootfsBytes, u.RootfsInodes})
		f.logs = f.logs.plus(used{u.LogBytes, u.LogInodes})
		sb, ok := r.sandboxes[c.sandboxID]
		if !ok {
			continue
		}
		k := containerKey{sb.config.GetMetadata().GetUid(), c.config.GetMetadata().GetName()}
		prev, seen := chosen[k]
		running := c.state == runtimeapi.ContainerState_CONTAINER_RUNNING
		if !seen || (running && prev.state != runtimeapi.ContainerState_CONTAINER_RUNNING) ||
			(running == (prev.state == runtimeapi.ContainerState_CONTAINER_RUNNING) && c.createdAt > prev.createdAt) {
			chosen[k] = c
		}
	}
	for k, c := range chosen {
		f.usage[k] = c.behavior.Disk
	}
	return f
}

// nodeFs is the node's filesystem: the logs, and the images and writable
// layers that no image filesystem holds.
func (f diskFigures) nodeFs() *statsapi.FsStats {
	on := f.logs
	switch {
	case f.disks.Image == nil:
		on = on.plus(f.images).plus(f.layers)
	case f.split:
		on = on.plus(f.layers)
	}
	return fsStats(f.at, f.disks.Node, on)
}

// imageFsUsed is what the runtime holds on the image filesystem.
func (f diskFigures) imageFsUsed() used {
	if f.split {
		return f.images
	}
	return f.images.plus(f.layers)
}

// fsStats is a filesystem's figures with the runtime's use added to the
// scripted other files.
func fsStats(at metav1.Time, fs Filesystem, runtime used) *statsapi.FsStats {
	u := used{fs.UsedBytes, fs.InodesUsed}.plus(runtime)
	return &statsapi.FsStats{
		Time:           at,
		CapacityBytes:  ptr(fs.CapacityBytes),
		AvailableBytes: ptr(fs.CapacityBytes - min(u.bytes, fs.CapacityBytes)),
		UsedBytes:      ptr(u.bytes),
		Inodes:         ptr(fs.Inodes),
		InodesFree:     ptr(fs.Inodes - min(u.inodes, fs.Inodes)),
		InodesUsed:     ptr(u.inodes),
	}
}

// withUsage is a device's figures with u as what is used of it by one
// kind of data (images, logs), as the kubelet reports them.
func withUsage(dev *statsapi.FsStats, u used) *statsapi.FsStats {
	out := *dev
	out.UsedBytes, out.InodesUsed = ptr(u.bytes), ptr(u.inodes)
	return &out
}

func fsUsedStats(at metav1.Time, u used) *statsapi.FsStats {
	return &statsapi.FsStats{Time: at, UsedBytes: ptr(u.bytes), InodesUsed: ptr(u.inodes)}
}

func ptr[T any](v T) *T { return &v }

func value(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
