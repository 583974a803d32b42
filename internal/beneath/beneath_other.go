//go:build !linux

package beneath

import (
	"errors"
	"os"
)

// MkdirAll is only supported on Linux.
func MkdirAll(base, sub string, perm os.FileMode) (string, error) {
	if _, err := split(sub); err != nil {
		return "", err
	}
	return "", errors.New("beneath: only supported on Linux")
}
