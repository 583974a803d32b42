package volumes

import (
	"io/fs"
	"os"
	"path/filepath"
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
// Symlinks get the group but keep their target's mode. With
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
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, gid); err != nil {
			fail(path, err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil // chmod would change the target
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := mask
		if d.IsDir() {
			m |= groupExec | fs.ModeSetgid
		}
		if want := info.Mode() | m; want != info.Mode() {
			if err := os.Chmod(path, want); err != nil {
				fail(path, err)
			}
		}
		return nil
	})
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
