package volumes_test

import (
	"io/fs"
	"syscall"
)

func gidOf(fi fs.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Gid }
