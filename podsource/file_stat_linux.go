package podsource

import (
	"io/fs"
	"syscall"
)

// inodeAndCtime gives the file's inode number and status change time in
// ns since the epoch.
func inodeAndCtime(info fs.FileInfo) (uint64, int64) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	sec, nsec := st.Ctim.Unix()
	return st.Ino, sec*1e9 + nsec
}
