package network

import (
	"os"
	"syscall"
)

// inode returns fi's inode number, 0 where the platform has none.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
