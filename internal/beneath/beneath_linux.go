package beneath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MkdirAll opens base/sub without leaving base, creating the missing
// directories of sub with mode perm (its permission bits and its setuid,
// setgid and sticky bits, whatever the umask), and returns the canonical path of what it
// opened (read back from the descriptor, so it holds no symlink). base is
// trusted; sub must be relative and have no "..". A sub that resolves
// outside base fails with ErrEscapes, and nothing is created outside
// base. The last element may be an existing file.
func MkdirAll(base, sub string, perm os.FileMode) (string, error) {
	return mkdirAll(base, sub, perm, true)
}

func mkdirAll(base, sub string, perm os.FileMode, useOpenat2 bool) (string, error) {
	els, err := split(sub)
	if err != nil {
		return "", err
	}
	baseFd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: base, Err: err}
	}
	defer unix.Close(baseFd)
	realBase, err := fdPath(baseFd)
	if err != nil {
		return "", err
	}
	var fd int
	if useOpenat2 {
		fd, err = walkOpenat2(baseFd, els, perm)
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			fd, err = walkNoFollow(baseFd, els, perm)
		}
	} else {
		fd, err = walkNoFollow(baseFd, els, perm)
	}
	if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) {
		return "", fmt.Errorf("%q %w", sub, ErrEscapes)
	}
	if err != nil {
		return "", fmt.Errorf("%q: %w", sub, err)
	}
	defer unix.Close(fd)
	p, err := fdPath(fd)
	if err != nil {
		return "", err
	}
	// The kernel kept resolution beneath base; check the result anyway.
	if p != realBase && !strings.HasPrefix(p, strings.TrimSuffix(realBase, "/")+"/") {
		return "", fmt.Errorf("%q %w", sub, ErrEscapes)
	}
	return p, nil
}

// fdPath is the path the kernel holds for an open descriptor.
func fdPath(fd int) (string, error) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("descriptor %d has no path (%q)", fd, p)
	}
	return p, nil
}

const (
	pathFlags = unix.O_PATH | unix.O_CLOEXEC
	beneath   = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS
)

// walkOpenat2 opens els beneath baseFd; symlinks are followed only while
// they stay beneath it. Missing directories are created below the longest
// existing prefix, each one opened again (no symlink allowed) before the
// next is made in it.
func walkOpenat2(baseFd int, els []string, perm os.FileMode) (int, error) {
	if len(els) == 0 {
		return unix.Dup(baseFd)
	}
	fd, err := openat2(baseFd, join(els), &unix.OpenHow{Flags: pathFlags, Resolve: beneath})
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	i := len(els) - 1
	parent := -1
	for ; i > 0; i-- {
		parent, err = openat2(baseFd, join(els[:i]), &unix.OpenHow{Flags: pathFlags | unix.O_DIRECTORY, Resolve: beneath})
		if err == nil {
			break
		}
		if !errors.Is(err, unix.ENOENT) {
			return -1, err
		}
	}
	if i == 0 {
		if parent, err = unix.Dup(baseFd); err != nil {
			return -1, err
		}
	}
	for _, el := range els[i:] {
		merr := unix.Mkdirat(parent, el, uint32(perm.Perm()))
		if merr != nil && !errors.Is(merr, unix.EEXIST) {
			unix.Close(parent)
			return -1, merr
		}
		next, err := openat2(parent, el, &unix.OpenHow{
			Flags:   pathFlags | unix.O_DIRECTORY | unix.O_NOFOLLOW,
			Resolve: beneath | unix.RESOLVE_NO_SYMLINKS,
		})
		unix.Close(parent)
		if err == nil && merr == nil {
			err = chmodFd(next, perm)
		}
		if err != nil {
			if next >= 0 {
				unix.Close(next)
			}
			return -1, err
		}
		parent = next
	}
	return parent, nil
}

// UnixMode is perm as chmod takes it: the permission bits, and the
// setuid, setgid and sticky bits at their Unix places.
func UnixMode(perm os.FileMode) uint32 {
	mode := uint32(perm.Perm())
	if perm&os.ModeSetuid != 0 {
		mode |= unix.S_ISUID
	}
	if perm&os.ModeSetgid != 0 {
		mode |= unix.S_ISGID
	}
	if perm&os.ModeSticky != 0 {
		mode |= unix.S_ISVTX
	}
	return mode
}

// chmodFd gives the directory open at fd (an O_PATH descriptor, which
// fchmod refuses) the mode perm, through its /proc/self/fd link, which
// leads to that very directory whatever its path has become since.
func chmodFd(fd int, perm os.FileMode) error {
	mode := UnixMode(perm)
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode); err != nil {
		return &os.PathError{Op: "chmod", Path: "/proc/self/fd/" + strconv.Itoa(fd), Err: err}
	}
	return nil
}

// walkNoFollow opens els one at a time with O_NOFOLLOW, refusing any
// symlink, creating missing directories relative to their parent's
// descriptor.
func walkNoFollow(baseFd int, els []string, perm os.FileMode) (int, error) {
	parent, err := unix.Dup(baseFd)
	if err != nil {
		return -1, err
	}
	for i, el := range els {
		fd, err := unix.Openat(parent, el, pathFlags|unix.O_NOFOLLOW, 0)
		made := false
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(parent, el, uint32(perm.Perm())); err == nil || errors.Is(err, unix.EEXIST) {
				made = err == nil
				fd, err = unix.Openat(parent, el, pathFlags|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
			}
		}
		unix.Close(parent)
		if err != nil {
			return -1, err
		}
		if made {
			if err := chmodFd(fd, perm); err != nil {
				unix.Close(fd)
				return -1, err
			}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			unix.Close(fd)
			return -1, unix.ELOOP
		case i < len(els)-1 && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
		parent = fd
	}
	return parent, nil
}

// openat2 retries the EAGAIN the kernel returns when a rename raced with
// a RESOLVE_BENEATH resolution.
func openat2(dirfd int, p string, how *unix.OpenHow) (int, error) {
	for range 16 {
		fd, err := unix.Openat2(dirfd, p, how)
		if !errors.Is(err, unix.EAGAIN) {
			return fd, err
		}
	}
	return -1, unix.EAGAIN
}
