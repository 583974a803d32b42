package volumes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

const (
	// dataLink names the symlink that points at the current generation.
	dataLink = "..data"
	// newDataLink is the symlink made beside dataLink and renamed over it.
	newDataLink = "..data_tmp"
	// generationLayout is the time layout of generation directory names,
	// which are "..<time>.<random>", as the kubelet names them.
	generationLayout = "2006_01_02_15_04_05."

	maxPathLength = 4096
	maxNameLength = 255
)

// ErrUnsafePath is returned (wrapped) when a content path or what lies in
// a volume directory could lead a write outside the directory: an
// absolute path, "..", a name reserved for the writer's own entries, two
// paths that collide, or an entry that is not what the writer left there
// (a symlink planted in place of one of its own).
var ErrUnsafePath = errors.New("unsafe path")

// FileProjection is one file of a content volume.
type FileProjection struct {
	// Data is the file's content.
	Data []byte
	// Mode is the file's permission bits (0644, 0400...).
	Mode os.FileMode
}

// AtomicWriter writes the files of a content volume (configMap, secret,
// downwardAPI, projected) so that a reader never sees a half-written set,
// as the kubelet does: each set of files (a generation) goes into a new
// hidden directory "..<timestamp>.<random>", the symlink "..data" is
// switched to it with one rename, and each user-visible name at the top
// of the directory is a symlink through "..data" ("key" ->
// "..data/key"; for a nested path "dir/key" the top-level "dir" ->
// "..data/dir"). The previous generation is removed after the switch.
//
// A reader that resolves "..data" once (or opens one file through its
// visible name) sees files of one generation only.
//
// AtomicWriter never writes, changes or removes anything outside its
// directory: paths are relative without "..", files are created with
// O_NOFOLLOW relative to descriptors of directories it just made, and an
// entry of the directory that is not what the writer would have left
// there (a symlink planted in place of "..data" or of a visible name)
// makes Write fail with an error naming it and wrapping ErrUnsafePath,
// before anything is changed.
//
// An AtomicWriter is not safe for concurrent use on the same directory;
// the volume manager calls a plugin's SetUp one at a time per volume.
type AtomicWriter struct {
	dir   string
	clock clock.PassiveClock
}

// NewAtomicWriter returns a writer for the directory dir, which it creates
// (mode 0755) if missing; its parent must exist. clk names the
// generations; nil means the real clock.
func NewAtomicWriter(dir string, clk clock.PassiveClock) *AtomicWriter {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &AtomicWriter{dir: dir, clock: clk}
}

// Write makes the directory show exactly payload, a map from relative
// path to file. When the directory already shows the same paths with the
// same content, nothing is written and changed is false. Otherwise a new
// generation is written, and every other generation (the previous one,
// leftovers of a crash) is removed; prepare, when not nil, is called with its
// directory before it is switched in (to set ownership, as the kubelet
// applies fsGroup there), and an error from it abandons the generation.
//
// Write blocks on file-system calls only. On error the previous
// generation, if any, stays in place.
func (w *AtomicWriter) Write(payload map[string]FileProjection, prepare func(genDir string) error) (changed bool, err error) {
	files, err := cleanPayload(payload)
	if err != nil {
		return false, err
	}
	if err := w.ensureDir(); err != nil {
		return false, err
	}
	oldGen, err := w.currentGeneration()
	if err != nil {
		return false, err
	}
	tops := topLevelNames(files)
	var missing []string
	for _, top := range tops {
		exists, err := w.checkVisible(top)
		if err != nil {
			return false, err
		}
		if !exists {
			missing = append(missing, top)
		}
	}

	var oldPaths map[string]bool
	write := true
	if oldGen != "" {
		oldPaths, err = w.listGeneration(oldGen)
		if err != nil {
			return false, err
		}
		same, err := w.sameContent(oldGen, oldPaths, files)
		if err != nil {
			return false, err
		}
		write = !same
	}

	if write {
		gen, err := w.writeGeneration(files, prepare)
		if err != nil {
			return false, err
		}
		if err := w.switchTo(gen); err != nil {
			_ = os.RemoveAll(filepath.Join(w.dir, gen))
			return false, err
		}
	}
	for _, top := range missing {
		if err := w.makeVisible(top); err != nil {
			return write, err
		}
	}
	if write && oldGen != "" {
		if err := w.removeStaleVisible(oldPaths, tops); err != nil {
			return true, err
		}
	}
	if write {
		if err := w.removeOldGenerations(); err != nil {
			return true, err
		}
	}
	return write, nil
}

// file is one entry of a cleaned payload.
type file struct {
	path string // cleaned, relative, "/"-separated
	FileProjection
}

// ValidatePath checks a content path as the writer does: not empty,
// relative, no ".." element, not starting with ".." (those names are the
// writer's own), at most 4096 bytes with elements of at most 255. The
// error names the path and wraps ErrUnsafePath.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("path must not be empty: %w", ErrUnsafePath)
	case path.IsAbs(p):
		return fmt.Errorf("path %q must be relative: %w", p, ErrUnsafePath)
	case len(p) > maxPathLength:
		return fmt.Errorf("path %q is longer than %d bytes", p, maxPathLength)
	}
	els := strings.Split(p, "/")
	for _, el := range els {
		if el == ".." {
			return fmt.Errorf("path %q must not contain '..': %w", p, ErrUnsafePath)
		}
		if len(el) > maxNameLength {
			return fmt.Errorf("path %q has an element longer than %d bytes", p, maxNameLength)
		}
	}
	if c := path.Clean(p); c == "." {
		return fmt.Errorf("path %q names the volume directory itself: %w", p, ErrUnsafePath)
	} else if strings.HasPrefix(c, "..") {
		return fmt.Errorf("path %q must not start with '..': %w", p, ErrUnsafePath)
	}
	return nil
}

// cleanPayload validates the paths of payload and returns its files
// sorted by path; two paths that clean to the same one, or a file whose
// path is a directory of another, collide.
func cleanPayload(payload map[string]FileProjection) ([]file, error) {
	files := make([]file, 0, len(payload))
	byPath := make(map[string]string, len(payload))
	for p, fp := range payload {
		if err := ValidatePath(p); err != nil {
			return nil, fmt.Errorf("volumes: %w", err)
		}
		if fp.Mode&^os.ModePerm != 0 {
			return nil, fmt.Errorf("volumes: path %q: mode %#o has bits other than permissions", p, uint32(fp.Mode))
		}
		c := path.Clean(p)
		if other, ok := byPath[c]; ok {
			a, b := min(p, other), max(p, other)
			return nil, fmt.Errorf("volumes: paths %q and %q collide: %w", a, b, ErrUnsafePath)
		}
		byPath[c] = p
		files = append(files, file{path: c, FileProjection: fp})
	}
	for c, p := range byPath {
		for d := path.Dir(c); d != "."; d = path.Dir(d) {
			if other, ok := byPath[d]; ok {
				return nil, fmt.Errorf("volumes: path %q collides with %q, which would be its directory: %w", p, other, ErrUnsafePath)
			}
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files, nil
}

// topLevelNames are the distinct first elements of the files' paths.
func topLevelNames(files []file) []string {
	var tops []string
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		top, _, _ := strings.Cut(f.path, "/")
		if !seen[top] {
			seen[top] = true
			tops = append(tops, top)
		}
	}
	return tops
}

// ensureDir creates the directory if missing and refuses one that is a
// symlink or not a directory.
func (w *AtomicWriter) ensureDir() error {
	if err := os.Mkdir(w.dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("volumes: %w", err)
	}
	fi, err := os.Lstat(w.dir)
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("volumes: %s is not a directory (%s): %w", w.dir, fi.Mode().Type(), ErrUnsafePath)
	}
	return nil
}

// isGenerationName reports whether name has the form of a generation
// directory, "..<time>.<random>".
func isGenerationName(name string) bool {
	rest, ok := strings.CutPrefix(name, "..")
	if !ok || len(rest) <= len(generationLayout) || rest[0] < '0' || rest[0] > '9' {
		return false
	}
	return !strings.ContainsAny(rest, "/")
}

// currentGeneration is the name of the generation "..data" points at, ""
// when there is none. Anything else in place of "..data" is refused.
func (w *AtomicWriter) currentGeneration() (string, error) {
	link := filepath.Join(w.dir, dataLink)
	target, err := os.Readlink(link)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("volumes: %s is not the writer's symlink: %v: %w", link, err, ErrUnsafePath)
	}
	if !isGenerationName(target) {
		return "", fmt.Errorf("volumes: %s points at %q, not a generation of the volume: %w", link, target, ErrUnsafePath)
	}
	fi, err := os.Lstat(filepath.Join(w.dir, target))
	if errors.Is(err, fs.ErrNotExist) {
		// A dangling "..data" (a crash between removal and switch):
		// write anew.
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("volumes: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("volumes: %s is not a directory (%s): %w", filepath.Join(w.dir, target), fi.Mode().Type(), ErrUnsafePath)
	}
	return target, nil
}

// checkVisible refuses a top-level name that is anything but absent or
// the writer's symlink into "..data", and tells which of the two it is.
func (w *AtomicWriter) checkVisible(top string) (exists bool, err error) {
	p := filepath.Join(w.dir, top)
	target, err := os.Readlink(p)
	if err == nil {
		if target != dataLink+"/"+top {
			return true, fmt.Errorf("volumes: %s points at %q, not into %s: %w", p, target, dataLink, ErrUnsafePath)
		}
		return true, nil
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("volumes: %w", err)
	}
	return true, fmt.Errorf("volumes: %s is a %s, not a link into %s: %w", p, typeName(fi.Mode()), dataLink, ErrUnsafePath)
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "special file"
}

// listGeneration returns the paths of the files (not directories) of a
// generation. It follows no symlink; a symlink or special file in a
// generation is refused.
func (w *AtomicWriter) listGeneration(gen string) (map[string]bool, error) {
	root := filepath.Join(w.dir, gen)
	paths := make(map[string]bool)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is a %s, not a file the writer made: %w", p, typeName(d.Type()), ErrUnsafePath)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		paths[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	return paths, nil
}

// sameContent reports whether generation gen holds exactly files.
func (w *AtomicWriter) sameContent(gen string, oldPaths map[string]bool, files []file) (bool, error) {
	if len(oldPaths) != len(files) {
		return false, nil
	}
	for _, f := range files {
		if !oldPaths[f.path] {
			return false, nil
		}
	}
	root, err := unix.Open(filepath.Join(w.dir, gen), unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("volumes: open %s: %w", filepath.Join(w.dir, gen), err)
	}
	defer unix.Close(root)
	buf := make([]byte, 4<<10)
	for _, f := range files {
		same, err := sameFile(root, f, buf)
		if err != nil {
			return false, fmt.Errorf("volumes: %s: %w", filepath.Join(w.dir, gen, f.path), err)
		}
		if !same {
			return false, nil
		}
	}
	return true, nil
}

// sameFile compares the file at f.path beneath root with f.Data, following
// no symlink on the way; buf is scratch space of at least 4 KiB.
func sameFile(root int, f file, buf []byte) (bool, error) {
	fd, err := openBeneath(root, f.path, unix.O_RDONLY, 0, false)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, fmt.Errorf("is not a regular file: %w", ErrUnsafePath)
	}
	if st.Size != int64(len(f.Data)) {
		return false, nil
	}
	for off := 0; off < len(f.Data); {
		n, err := unix.Read(fd, buf[:min(len(buf), len(f.Data)-off)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, err
		}
		if n == 0 || !bytes.Equal(buf[:n], f.Data[off:off+n]) {
			return false, nil
		}
		off += n
	}
	return true, nil
}

// openBeneath opens rel beneath the directory descriptor root one element
// at a time with O_NOFOLLOW. With create, missing directories are made
// (0755) and the file is created exclusively with mode.
func openBeneath(root int, rel string, flags int, mode uint32, create bool) (int, error) {
	els := strings.Split(rel, "/")
	dir, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for _, el := range els[:len(els)-1] {
		if create {
			if err := unix.Mkdirat(dir, el, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(dir)
				return -1, err
			}
		}
		next, err := unix.Openat(dir, el, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(dir)
		if err != nil {
			return -1, err
		}
		dir = next
	}
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if create {
		flags |= unix.O_CREAT | unix.O_EXCL
	}
	fd, err := unix.Openat(dir, els[len(els)-1], flags, mode)
	unix.Close(dir)
	return fd, err
}

// writeGeneration writes files into a new generation directory and returns
// its name.
func (w *AtomicWriter) writeGeneration(files []file, prepare func(string) error) (string, error) {
	genPath, err := os.MkdirTemp(w.dir, ".."+w.clock.Now().UTC().Format(generationLayout))
	if err != nil {
		return "", fmt.Errorf("volumes: %w", err)
	}
	gen := filepath.Base(genPath)
	fail := func(err error) (string, error) {
		_ = os.RemoveAll(genPath)
		return "", err
	}
	if err := os.Chmod(genPath, 0o755); err != nil {
		return fail(fmt.Errorf("volumes: %w", err))
	}
	root, err := unix.Open(genPath, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("volumes: open %s: %w", genPath, err))
	}
	defer unix.Close(root)
	for _, f := range files {
		if err := writeFile(root, f); err != nil {
			return fail(fmt.Errorf("volumes: write %s: %w", filepath.Join(genPath, f.path), err))
		}
	}
	if prepare != nil {
		if err := prepare(genPath); err != nil {
			return fail(err)
		}
	}
	return gen, nil
}

func writeFile(root int, f file) error {
	fd, err := openBeneath(root, f.path, unix.O_WRONLY, uint32(f.Mode.Perm()), true)
	if err != nil {
		return err
	}
	fh := os.NewFile(uintptr(fd), f.path)
	if _, err := fh.Write(f.Data); err != nil {
		fh.Close()
		return err
	}
	// The umask may have cleared bits of the mode.
	if err := fh.Chmod(f.Mode.Perm()); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// switchTo points "..data" at generation gen with one rename.
func (w *AtomicWriter) switchTo(gen string) error {
	tmp := filepath.Join(w.dir, newDataLink)
	// A leftover of a crash; Remove never follows a symlink.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("volumes: %w", err)
	}
	if err := os.Symlink(gen, tmp); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(w.dir, dataLink)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("volumes: %w", err)
	}
	return nil
}

// makeVisible creates the symlink top -> ..data/top when missing
// (checkVisible has refused anything else in its place).
func (w *AtomicWriter) makeVisible(top string) error {
	err := os.Symlink(dataLink+"/"+top, filepath.Join(w.dir, top))
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("volumes: %w", err)
	}
	if err != nil {
		_, err = w.checkVisible(top)
		return err
	}
	return nil
}

// removeStaleVisible removes the visible symlinks of the old generation
// whose top-level name the new one no longer has. Only symlinks are
// removed, and removing a symlink never touches what it points at.
func (w *AtomicWriter) removeStaleVisible(oldPaths map[string]bool, tops []string) error {
	keep := make(map[string]bool, len(tops))
	for _, t := range tops {
		keep[t] = true
	}
	var errs []error
	for p := range oldPaths {
		top, _, _ := strings.Cut(p, "/")
		if keep[top] {
			continue
		}
		keep[top] = true // once
		full := filepath.Join(w.dir, top)
		fi, err := os.Lstat(full)
		if err != nil || fi.Mode().Type() != fs.ModeSymlink {
			continue
		}
		if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	return nil
}

// removeOldGenerations removes every generation directory but the one
// "..data" points at. os.RemoveAll never follows a symlink.
func (w *AtomicWriter) removeOldGenerations() error {
	current, err := os.Readlink(filepath.Join(w.dir, dataLink))
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == current || !isGenerationName(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(w.dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	return nil
}
