//go:build !linux

package volumes

import (
	"os"
)

// removeAll removes dir and what lies beneath it without following a
// symlink. Unlike the Linux version it does not tell mount points apart.
func removeAll(dir string) error { return os.RemoveAll(dir) }
