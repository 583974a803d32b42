//go:build !unix

package cri

import "os"

// logSize returns the size of the file at path, following symlinks.
func logSize(path string) (int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}
