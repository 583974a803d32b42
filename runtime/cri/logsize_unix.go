//go:build unix

package cri

import (
	"io/fs"
	"syscall"
)

// logSize returns the size of the file at path, following symlinks, as
// os.Stat would, without allocating its FileInfo: the log rotation check
// asks it of every running container's log every 10 s. An error is an
// *fs.PathError, so errors.Is(err, fs.ErrNotExist) holds for a missing
// file.
func logSize(path string) (int64, error) {
	var st syscall.Stat_t
	for {
		err := syscall.Stat(path, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, &fs.PathError{Op: "stat", Path: path, Err: err}
		}
		return st.Size, nil
	}
}
