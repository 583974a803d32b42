package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/mount-utils"
)

// EmptyDirPluginName is the emptyDir plugin's name, the kubelet's.
const EmptyDirPluginName = "kubernetes.io/empty-dir"

// emptyDirPerm is the mode of an emptyDir's directory: anyone in the pod
// may write, whatever user its containers run as (the kubelet's 0777).
const emptyDirPerm fs.FileMode = 0o777

// EmptyDir is the emptyDir plugin: a directory in the pod's directory,
// or with medium Memory a tmpfs mounted there, sized by the volume's
// sizeLimit, else by the pod's memory limit when every container has
// one, else unsized (the kernel's default, half of RAM: nodekit knows no
// node allocatable memory to bound it with, as the kubelet does). Its
// volumes are managed (they take the pod's fsGroup). HugePages media
// are not supported: SetUp fails naming the medium. Safe for
// concurrent use.
type EmptyDir struct {
	mounter mount.Interface
}

var _ Plugin = (*EmptyDir)(nil)

// NewEmptyDir returns the emptyDir plugin, mounting tmpfs through
// cfg.Mounter (nil: the host's mounter). With cfg.NoTmpfs (an agent
// that may not mount) a Memory emptyDir fails to set up with an error
// saying so, as the kubelet's does; other emptyDirs work. Only Mounter
// and NoTmpfs of cfg are used. It does no I/O but mount.New's probe
// when cfg.Mounter is nil.
func NewEmptyDir(cfg PluginConfig) *EmptyDir { return &EmptyDir{mounter: cfg.mounter()} }

// Name implements Plugin.
func (*EmptyDir) Name() string { return EmptyDirPluginName }

// CanSupport implements Plugin: volumes with an emptyDir source.
func (*EmptyDir) CanSupport(v *v1.Volume) bool { return v.EmptyDir != nil }

// Attributes implements Plugin: managed, writable, never refreshed.
func (*EmptyDir) Attributes(*v1.Volume) Attributes { return Attributes{Managed: true} }

// SetUp implements Plugin: it creates req.Dir with mode 0777 (whatever
// the umask) and, for medium Memory, mounts a tmpfs on it unless one is
// mounted already. What the directory holds is kept.
func (e *EmptyDir) SetUp(_ context.Context, req *Request) (string, error) {
	medium := req.Volume.EmptyDir.Medium
	switch medium {
	case v1.StorageMediumDefault, v1.StorageMediumMemory:
	default:
		return "", fmt.Errorf("emptyDir medium %q is not supported", medium)
	}
	if medium == v1.StorageMediumMemory && e.mounter == nil {
		return "", errors.New("memory storage requested, but no mounter is configured (PluginConfig.NoTmpfs is set)")
	}
	if err := os.MkdirAll(req.Dir, emptyDirPerm); err != nil {
		return "", err
	}
	if medium == v1.StorageMediumMemory {
		notMnt, err := e.mounter.IsLikelyNotMountPoint(req.Dir)
		if err != nil {
			return "", err
		}
		if notMnt {
			var opts []string
			if size := tmpfsSize(req.Pod, req.Volume); size > 0 {
				opts = append(opts, "size="+strconv.FormatInt(size, 10))
			}
			if err := e.mounter.MountSensitiveWithoutSystemd("tmpfs", req.Dir, "tmpfs", opts, nil); err != nil {
				return "", err
			}
		}
	}
	// A umask may have taken bits from the mode MkdirAll asked for.
	st, err := os.Lstat(req.Dir)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm() != emptyDirPerm {
		if err := os.Chmod(req.Dir, emptyDirPerm|st.Mode()&(fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return "", err
		}
	}
	return req.Dir, nil
}

// TearDown implements Plugin: it unmounts a tmpfs mounted on dir and
// removes dir with what it holds, following no symlink and crossing no
// mount point: a mount beneath dir (a container's bind mount) is left
// in place, with its content, and TearDown fails naming it.
func (e *EmptyDir) TearDown(_ context.Context, dir string) error {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.IsDir() && e.mounter != nil {
		notMnt, err := e.mounter.IsLikelyNotMountPoint(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if !notMnt {
			if err := e.mounter.Unmount(dir); err != nil {
				return err
			}
		}
	}
	return removeAll(dir)
}

// tmpfsSize is the size of a Memory emptyDir in bytes, 0 for unsized:
// the smaller of the volume's sizeLimit and the pod's memory limit, of
// those that are set.
func tmpfsSize(pod *v1.Pod, v *v1.Volume) int64 {
	var size int64
	if lim, ok := podMemoryLimit(pod); ok {
		size = lim
	}
	if sl := v.EmptyDir.SizeLimit; sl != nil && sl.Sign() > 0 {
		if b := sl.Value(); size == 0 || b < size {
			size = b
		}
	}
	return size
}

// podMemoryLimit is the pod's memory limit, as its cgroup gets it: set
// only when the pod declares one at pod level or every container does.
func podMemoryLimit(pod *v1.Pod) (int64, bool) {
	declared := pod.Spec.Resources != nil && hasMemoryLimit(pod.Spec.Resources.Limits)
	if !declared {
		declared = len(pod.Spec.Containers) > 0
		for i := range pod.Spec.InitContainers {
			declared = declared && hasMemoryLimit(pod.Spec.InitContainers[i].Resources.Limits)
		}
		for i := range pod.Spec.Containers {
			declared = declared && hasMemoryLimit(pod.Spec.Containers[i].Resources.Limits)
		}
	}
	if !declared {
		return 0, false
	}
	q, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceMemory]
	if !ok || q.Sign() <= 0 {
		return 0, false
	}
	return q.Value(), true
}

func hasMemoryLimit(l v1.ResourceList) bool {
	q, ok := l[v1.ResourceMemory]
	return ok && q.Cmp(resource.Quantity{}) > 0
}
