package volumes

import (
	"io/fs"
	"os"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// Group permission bits the fsGroup gives, as the kubelet's.
const (
	groupRW   fs.FileMode = 0o660
	groupRO   fs.FileMode = 0o440
	groupExec fs.FileMode = 0o110
)

// setOwnership gives the files under dir the pod's fsGroup, as the
// kubelet does for managed volumes: every file and directory gets the
// group, user and group read (and write unless readOnly), directories
// also search and the setgid bit, so files made later inherit the group.
// Symlinks get the group but keep their target's mode; the walk never
// follows a symlink, not even one a container swaps in for a directory
// while it runs, and does not descend into a mount point beneath dir.
// With
// fsGroupChangePolicy OnRootMismatch nothing is done when dir already
// has the group and those bits. A pod without an fsGroup is left alone.
// Failures to change one file are reported through fail and the walk
// goes on, as the kubelet's; an unreadable directory ends it with its
// error.
func setOwnership(pod *v1.Pod, dir string, readOnly bool, fail func(path string, err error)) error {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil {
		return nil
	}
	gid := int(*sc.FSGroup)
	if sc.FSGroupChangePolicy != nil && *sc.FSGroupChangePolicy == v1.FSGroupChangeOnRootMismatch && !rootNeedsChange(dir, gid, readOnly) {
		return nil
	}
	mask := groupRW
	if readOnly {
		mask = groupRO
	}
	add := func(_ fs.FileMode, isDir bool) fs.FileMode {
		if isDir {
			return mask | groupExec | fs.ModeSetgid
		}
		return mask
	}
	return chownTree(dir, gid, add, fail)
}

// rootNeedsChange reports whether dir lacks the group or the bits
// setOwnership gives, the OnRootMismatch test.
func rootNeedsChange(dir string, gid int, readOnly bool) bool {
	st, err := os.Stat(dir)
	if err != nil {
		return true
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || int(sys.Gid) != gid || !st.IsDir() {
		return true
	}
	want := groupRW | groupExec
	if readOnly {
		want = groupRO | groupExec
	}
	return st.Mode().Perm()&want != want || st.Mode()&fs.ModeSetgid == 0
}
