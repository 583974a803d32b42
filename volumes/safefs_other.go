//go:build !linux

package volumes

import (
	"io/fs"
	"os"
	"path/filepath"
)

// removeAll removes dir and what lies beneath it without following a
// symlink. Unlike the Linux version it does not tell mount points apart.
func removeAll(dir string) error { return os.RemoveAll(dir) }

// chownTree gives the entries beneath dir the group gid and the bits add
// returns, following no symlink it sees (the Linux version also resists
// entries swapped meanwhile and stops at mount points).
func chownTree(dir string, gid int, add func(mode fs.FileMode, isDir bool) fs.FileMode, fail func(path string, err error)) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, gid); err != nil {
			fail(path, err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if want := info.Mode() | add(info.Mode(), d.IsDir()); want != info.Mode() {
			if err := os.Chmod(path, want); err != nil {
				fail(path, err)
			}
		}
		return nil
	})
}
