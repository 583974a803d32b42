package volumes

import (
	"os"
	"path/filepath"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// VolumeStats measures the volumes of the pod of that UID that live
// under the pods directory (emptyDir on disk or in memory, configMap,
// secret, downwardAPI, projected: every volume but hostPath), as the
// kubelet's du-based volume metrics do: the bytes of the blocks its
// files hold and the inodes it uses, counting hard links once and not
// crossing into other filesystems mounted below it, plus the capacity
// and free space of the filesystem it is on. Each entry is named after
// the pod's volume; the list is sorted by name and empty for a pod with
// no such volume. A volume that cannot be read is left out. Each call
// walks the volumes afresh. Safe for concurrent use.
func (m *Manager) VolumeStats(uid types.UID) []statsapi.VolumeStats {
	volumesDir := filepath.Join(m.podDir(uid), "volumes")
	plugins, _ := os.ReadDir(volumesDir)
	var out []statsapi.VolumeStats
	for _, pe := range plugins {
		if !pe.IsDir() {
			continue
		}
		names, _ := os.ReadDir(filepath.Join(volumesDir, pe.Name()))
		for _, ve := range names {
			fs, ok := measure(filepath.Join(volumesDir, pe.Name(), ve.Name()))
			if !ok {
				continue
			}
			fs.Time = metav1.NewTime(m.cfg.Clock.Now())
			out = append(out, statsapi.VolumeStats{Name: ve.Name(), FsStats: fs})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
