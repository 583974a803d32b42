// Package testenv decides what a test does on a machine that lacks what
// it needs (root, mounts, writable cgroups, a block device, the CNI
// plugins): it skips, unless the environment says the machine must have
// it, as "make test" does. CI runs "make test" as root on a machine that
// has all of these, so there such a test can only pass by running.
package testenv

import (
	"os"
	"testing"
)

// Need is a kind of requirement, named by the environment variable that
// turns its skips into failures.
type Need string

// The requirements "make test" sets.
const (
	// Privileged: root, mounts, a file's group, cgroups, a block device.
	Privileged Need = "NODEKIT_PRIVILEGED_REQUIRED"
	// Network: root and the CNI plugins, for network namespaces.
	Network Need = "NODEKIT_NETWORK_REQUIRED"
)

// Missing returns the function a test calls when the machine lacks what
// it needs: t.Skipf, or t.Fatalf when n's variable is set.
func (n Need) Missing(t testing.TB) func(format string, args ...any) {
	if os.Getenv(string(n)) != "" {
		return t.Fatalf
	}
	return t.Skipf
}

// Root calls Missing when the test does not run as root.
func (n Need) Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		n.Missing(t)("%s needs root (%s makes this a failure)", why, string(n))
	}
}
