package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/internal/beneath"
)

// errMountBeneath is wrapped by removeAll when a mount point lies beneath
// the directory it removes.
var errMountBeneath = errors.New("a mount point lies beneath the directory")

// removeAll removes dir and what lies beneath it. It never follows a
// symlink (a symlink is removed, not its target) and never crosses into
// another mount: a mount point beneath dir (a bind mount a container or
// an administrator left there) is left as it is, with what it holds, and
// removeAll returns an error naming it and wrapping errMountBeneath. The
// directories are opened relative to their parent's descriptor with
// O_NOFOLLOW, so an entry swapped for a symlink meanwhile is not
// followed either. A missing dir is not an error.
func removeAll(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return os.Remove(dir)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	mnt, err := mountOf(fd)
	if err != nil {
		unix.Close(fd)
		return &fs.PathError{Op: "statx", Path: dir, Err: err}
	}
	// dir itself must lie on its parent's mount: one still mounted on it
	// (a bind mount of a host directory, which a device comparison does
	// not tell from a plain directory) is not emptied.
	if pm, err := pathMount(filepath.Dir(dir)); err != nil || pm != mnt {
		unix.Close(fd)
		if err != nil {
			return err
		}
		return fmt.Errorf("%s is a mount point, left in place: %w", dir, errMountBeneath)
	}
	var errs []error
	removeBeneath(fd, dir, mnt, &errs)
	unix.Close(fd)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// removeBeneath removes the entries of the directory fd (at path p, for
// errors) that lie on the mount mnt; it closes nothing it did not open.
func removeBeneath(fd int, p string, mnt mountID, errs *[]error) {
	names, err := readNames(fd)
	if err != nil {
		*errs = append(*errs, &fs.PathError{Op: "readdir", Path: p, Err: err})
		return
	}
	for _, name := range names {
		child := filepath.Join(p, name)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				*errs = append(*errs, &fs.PathError{Op: "lstat", Path: child, Err: err})
			}
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				if !errors.Is(err, unix.ENOENT) {
					*errs = append(*errs, &fs.PathError{Op: "open", Path: child, Err: err})
				}
				continue
			}
			cm, err := mountOf(cfd)
			switch {
			case err != nil:
				*errs = append(*errs, &fs.PathError{Op: "statx", Path: child, Err: err})
			case cm != mnt:
				*errs = append(*errs, fmt.Errorf("%s is a mount point, left in place: %w", child, errMountBeneath))
			default:
				n := len(*errs)
				removeBeneath(cfd, child, mnt, errs)
				if len(*errs) == n {
					if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
						*errs = append(*errs, &fs.PathError{Op: "rmdir", Path: child, Err: err})
					}
				}
			}
			unix.Close(cfd)
			continue
		}
		if err := unix.Unlinkat(fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			*errs = append(*errs, &fs.PathError{Op: "unlink", Path: child, Err: err})
		}
	}
}

// readNames lists the directory fd without closing it.
func readNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	return f.Readdirnames(-1)
}

// mountID tells mounts apart: the kernel's mount ID where statx gives
// it, else the device (which does not tell a bind mount of the same file
// system apart).
type mountID struct {
	id, dev uint64
}

// pathMount is the mount the directory p lies on.
func pathMount(p string) (mountID, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return mountID{}, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	m, err := mountOf(fd)
	if err != nil {
		return mountID{}, &fs.PathError{Op: "statx", Path: p, Err: err}
	}
	return m, nil
}

// mountOf is the mount the open file fd lies on.
func mountOf(fd int) (mountID, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		if !errors.Is(err, unix.ENOSYS) {
			return mountID{}, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return mountID{}, err
		}
		return mountID{dev: st.Dev}, nil
	}
	m := mountID{dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor)}
	if stx.Mask&unix.STATX_MNT_ID != 0 {
		m.id = stx.Mnt_id
	}
	return m, nil
}

// chownTree gives every entry beneath dir, and dir, the group gid, and
// to every entry but symlinks the permission bits add(mode of the entry,
// whether it is a directory) returns. It never follows a symlink, even
// one swapped in for an entry while it works (it works on descriptors
// opened relative to their parent with O_NOFOLLOW, and changes modes
// through the descriptor), and does not descend into another mount.
// Failures to change one entry go to fail and the walk goes on; an
// unreadable dir ends it with its error.
func chownTree(dir string, gid int, add func(mode fs.FileMode, isDir bool) fs.FileMode, fail func(path string, err error)) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	mnt, err := mountOf(fd)
	if err != nil {
		return &fs.PathError{Op: "statx", Path: dir, Err: err}
	}
	chownFd(fd, false, dir, gid, add, fail)
	return chownBeneath(fd, dir, mnt, gid, add, fail)
}

// chownFd changes the open file fd, a directory or a regular file opened
// for reading, or (pathOnly) an O_PATH descriptor of a special file.
func chownFd(fd int, pathOnly bool, p string, gid int, add func(fs.FileMode, bool) fs.FileMode, fail func(string, error)) {
	if err := unix.Fchownat(fd, "", -1, gid, unix.AT_EMPTY_PATH); err != nil {
		fail(p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		fail(p, err)
		return
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	mode := fs.FileMode(st.Mode & 0o777)
	if st.Mode&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	want := mode | add(mode, isDir)
	if want == mode {
		return
	}
	bits := beneath.UnixMode(want)
	var err error
	if pathOnly {
		// fchmod does not take an O_PATH descriptor; its /proc/self/fd
		// link names the very file it holds, whatever the path now
		// resolves to.
		err = unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), bits)
	} else {
		err = unix.Fchmod(fd, bits)
	}
	if err != nil {
		fail(p, err)
	}
}

func chownBeneath(fd int, p string, mnt mountID, gid int, add func(fs.FileMode, bool) fs.FileMode, fail func(string, error)) error {
	names, err := readNames(fd)
	if err != nil {
		return &fs.PathError{Op: "readdir", Path: p, Err: err}
	}
	for _, name := range names {
		child := filepath.Join(p, name)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				fail(child, err)
			}
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if err := unix.Fchownat(fd, name, -1, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.ENOENT) {
				fail(child, err)
			}
			continue
		}
		// Directories and regular files are opened for reading (no side
		// effect), special files (a FIFO, a device) only as a path.
		flags, pathOnly := unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, true
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			flags, pathOnly = unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, false
		case unix.S_IFREG:
			flags, pathOnly = unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_CLOEXEC, false
		}
		cfd, err := unix.Openat(fd, name, flags, 0)
		if errors.Is(err, unix.EACCES) && st.Mode&unix.S_IFMT == unix.S_IFREG {
			// Not readable by the agent (which runs without root):
			// as a path then.
			flags, pathOnly = unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, true
			cfd, err = unix.Openat(fd, name, flags, 0)
		}
		if err != nil {
			// ELOOP, ENOTDIR: swapped for a symlink or a file since; left.
			if !errors.Is(err, unix.ENOENT) {
				fail(child, err)
			}
			continue
		}
		var cst unix.Stat_t
		if err := unix.Fstat(cfd, &cst); err != nil {
			fail(child, err)
			unix.Close(cfd)
			continue
		}
		if cst.Mode&unix.S_IFMT == unix.S_IFLNK || cst.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT {
			unix.Close(cfd) // swapped for something else since the Fstatat
			continue
		}
		if cst.Mode&unix.S_IFMT == unix.S_IFDIR {
			cm, err := mountOf(cfd)
			if err != nil || cm != mnt {
				if err == nil {
					err = fmt.Errorf("a mount point, not descended into: %w", errMountBeneath)
				}
				fail(child, err)
				unix.Close(cfd)
				continue
			}
			chownFd(cfd, false, child, gid, add, fail)
			err = chownBeneath(cfd, child, mnt, gid, add, fail)
			unix.Close(cfd)
			if err != nil {
				return err
			}
			continue
		}
		chownFd(cfd, pathOnly, child, gid, add, fail)
		unix.Close(cfd)
	}
	return nil
}
