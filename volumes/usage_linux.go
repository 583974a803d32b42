package volumes

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// measure returns the usage of the directory tree at dir (see
// Manager.VolumeStats) and its filesystem's figures; false when dir
// cannot be read.
func measure(dir string) (statsapi.FsStats, bool) {
	var root syscall.Stat_t
	if err := syscall.Lstat(dir, &root); err != nil {
		return statsapi.FsStats{}, false
	}
	var used, inodes uint64
	seen := map[uint64]bool{} // inodes of files with more than one link
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while measured
			}
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st.Dev != root.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		used += uint64(st.Blocks) * 512
		inodes++
		return nil
	})
	if err != nil {
		return statsapi.FsStats{}, false
	}
	out := statsapi.FsStats{UsedBytes: &used, InodesUsed: &inodes}
	var sfs syscall.Statfs_t
	if syscall.Statfs(dir, &sfs) == nil {
		capacity, avail := sfs.Blocks*uint64(sfs.Bsize), sfs.Bavail*uint64(sfs.Bsize)
		total, free := sfs.Files, sfs.Ffree
		out.CapacityBytes, out.AvailableBytes, out.Inodes, out.InodesFree = &capacity, &avail, &total, &free
	}
	return out, true
}
