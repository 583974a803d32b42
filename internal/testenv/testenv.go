// Package testenv decides what a test does on a machine that lacks what
// it needs (root, mounts, writable cgroups, a block device): it skips,
// unless the environment says the machine must have it, as "make test"
// does. CI runs "make test" as root on a machine that allows all of
// these, so there such a test can only pass by running.
package testenv

import (
	"os"
	"testing"
)

// PrivilegedRequired is the variable that turns these skips into
// failures; "make test" sets it.
const PrivilegedRequired = "NODEKIT_PRIVILEGED_REQUIRED"

// Missing returns the function a test calls when the machine lacks what
// it needs: t.Skipf, or t.Fatalf when PrivilegedRequired is set.
func Missing(t testing.TB) func(format string, args ...any) {
	if os.Getenv(PrivilegedRequired) != "" {
		return t.Fatalf
	}
	return t.Skipf
}

// Root calls Missing when the test does not run as root.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t)("%s needs root (%s makes this a failure)", why, PrivilegedRequired)
	}
}
