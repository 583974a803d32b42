package podsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// FileConfig configures a manifest directory source.
type FileConfig struct {
	// Dir holds one pod manifest (YAML or JSON) per file; files whose
	// names start with "." are ignored. Required.
	Dir string
	// NodeName suffixes pod names and feeds the UIDs. Required.
	NodeName string
	// Period is how often the directory is re-read besides change
	// notifications. Default 20s, the kubelet's fileCheckFrequency.
	Period time.Duration
	// MaxManifestBytes refuses a larger file before reading it. Default
	// DefaultMaxManifestBytes (10 MiB), the kubelet's limit.
	MaxManifestBytes int64
	Clock            clock.WithTicker
	Logger           logr.Logger
	Events           EventFunc
}

// File is the static pod source of a manifest directory. It sends a SET
// of all valid pods at start (an empty one for an empty or missing
// directory, so that the source counts as seen) and after every change: a
// file that does not parse or validate gets a warning event and a log
// line naming the file and the field, and is left out; the other files
// are unaffected. A directory that cannot be read keeps the pods last
// sent.
type File struct {
	cfg FileConfig
	// parsed remembers each file's pod by version (see fileVersion), so
	// a re-read of an unchanged directory parses nothing. Only Run's
	// goroutine uses it.
	parsed map[string]parsedFile
	// scans counts the reads of the directory; a file not met in the
	// latest is forgotten.
	scans uint64
	// found is the memory of a scan's valid pods, kept for the next.
	found []foundPod
}

type foundPod struct {
	path string
	pod  *v1.Pod
}

type parsedFile struct {
	version fileVersion
	pod     *v1.Pod
	err     error
	scan    uint64 // the last scan that met the file
}

// fileVersion tells the versions of a file apart, as far as its metadata
// can: a write changes the modification time, the size or the status
// change time (ctime), which, unlike the modification time, cannot be set
// back; a file renamed into place has another inode. Off Linux they are
// zero, and only the modification time and size count.
type fileVersion struct {
	mod   int64 // modification time, ns since the epoch
	size  int64
	mode  fs.FileMode // the type bits
	ino   uint64
	ctime int64 // ns since the epoch
}

func versionOf(info fs.FileInfo) fileVersion {
	ino, ctime := inodeAndCtime(info)
	return fileVersion{mod: info.ModTime().UnixNano(), size: info.Size(), mode: info.Mode().Type(), ino: ino, ctime: ctime}
}

// NewFile returns a directory source.
func NewFile(cfg FileConfig) (*File, error) {
	if cfg.Dir == "" {
		return nil, errors.New("podsource: FileConfig.Dir is required")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("podsource: FileConfig.NodeName is required")
	}
	if cfg.Period <= 0 {
		cfg.Period = 20 * time.Second
	}
	if cfg.MaxManifestBytes <= 0 {
		cfg.MaxManifestBytes = DefaultMaxManifestBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	if cfg.Events == nil {
		cfg.Events = func(*v1.Pod, string, string, string) {}
	}
	return &File{cfg: cfg, parsed: map[string]parsedFile{}}, nil
}

// Name implements Source.
func (f *File) Name() string { return SourceFile }

// Run implements Source. Changes are picked up through fsnotify when it
// works, and by the periodic re-read in any case.
func (f *File) Run(ctx context.Context, out chan<- Update) error {
	var events <-chan fsnotify.Event
	if w, err := fsnotify.NewWatcher(); err == nil {
		defer w.Close()
		if err := w.Add(f.cfg.Dir); err == nil {
			events = w.Events
		} else {
			f.cfg.Logger.V(2).Info("watching the manifest directory failed; polling only", "dir", f.cfg.Dir, "err", err)
		}
	}
	tick := f.cfg.Clock.NewTicker(f.cfg.Period)
	defer tick.Stop()
	sent := false
	send := func() {
		pods, origins, changed, ok := f.scan()
		if !ok || sent && !changed {
			return
		}
		sent = true
		select {
		case out <- Update{Op: SET, Pods: pods, Source: SourceFile, Origins: origins}:
		case <-ctx.Done():
		}
	}
	send()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-events:
		case <-tick.C():
		}
		send()
	}
}

// scan reads every manifest and reports whether the set of pods changed
// since the last scan: a file appeared or went, or gave another pod (a
// pod's UID follows its content and file) or another error. Only then
// does it return the valid pods, in file name order, and the file of
// each, so that the periodic re-read of an unchanged directory builds
// nothing. A directory that does not exist holds no pods; one that
// cannot be read gives ok false, and the pods last sent stand, as in the
// kubelet: a passing I/O error must not kill them.
func (f *File) scan() (pods []*v1.Pod, origins map[types.UID]string, changed, ok bool) {
	entries, err := os.ReadDir(f.cfg.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		f.cfg.Logger.V(2).Info("the manifest directory does not exist", "dir", f.cfg.Dir)
		changed = len(f.parsed) > 0
		clear(f.parsed)
		return nil, nil, changed, true
	}
	if err != nil {
		f.cfg.Logger.Error(err, "reading the manifest directory; keeping the pods last read", "dir", f.cfg.Dir)
		return nil, nil, false, false
	}
	seen := f.cfg.Clock.Now()
	f.scans++
	found := f.found[:0]
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(f.cfg.Dir, e.Name())
		pod, err, fresh, differs := f.cached(path, seen)
		changed = changed || differs
		if errors.Is(err, errIsDir) {
			continue // a symlink to a directory: not recursed into, as by the kubelet
		}
		if err != nil {
			if fresh {
				f.cfg.Logger.Error(err, "skipping an invalid manifest", "file", path)
				f.cfg.Events(nil, v1.EventTypeWarning, "FailedToLoadManifest", fmt.Sprintf("manifest %s: %v", path, err))
			}
			continue
		}
		found = append(found, foundPod{path, pod})
	}
	for path, p := range f.parsed {
		if p.scan != f.scans {
			delete(f.parsed, path)
			changed = true
		}
	}
	if changed {
		origins = make(map[types.UID]string, len(found))
		pods = make([]*v1.Pod, 0, len(found))
		for _, fp := range found {
			pods = append(pods, fp.pod)
			origins[fp.pod.UID] = fp.path
		}
	}
	clear(found) // the next scan's memory holds no pods
	f.found = found
	return pods, origins, changed, true
}

// cached returns the file's pod, parsing it only when it changed; fresh
// reports a new parse (or a file that cannot be read), and differs that
// the file's pod or error is not the one it gave last time. A symlink is
// followed, as the kubelet follows it; a path that is not a regular file
// (a named pipe, a device, a socket) is refused without being opened, for
// opening a named pipe would block the source.
func (f *File) cached(path string, seen time.Time) (pod *v1.Pod, err error, fresh, differs bool) {
	last, known := f.parsed[path]
	info, err := os.Stat(path)
	if err != nil {
		differs = !known || last.pod != nil || !sameError(last.err, err)
		f.parsed[path] = parsedFile{err: err, scan: f.scans}
		return nil, err, true, differs
	}
	version := versionOf(info)
	if known && last.version == version {
		last.scan = f.scans
		f.parsed[path] = last
		return last.pod, last.err, false, false
	}
	if err = notRegular(info); err == nil {
		pod, err = f.load(path, seen)
	}
	f.parsed[path] = parsedFile{version: version, pod: pod, err: err, scan: f.scans}
	differs = !known || !samePod(last.pod, pod) || !sameError(last.err, err)
	return pod, err, true, differs
}

// samePod reports whether two parses gave the same pod: the same UID,
// which the kubelet derives from the pod's content and file.
func samePod(a, b *v1.Pod) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// errIsDir is notRegular's verdict on a directory.
var errIsDir = errors.New("a directory")

// notRegular is nil for a regular file, errIsDir for a directory, and an
// error naming the kind of anything else.
func notRegular(info fs.FileInfo) error {
	m := info.Mode()
	switch {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return errIsDir
	case m&fs.ModeNamedPipe != 0:
		return errors.New("not a regular file but a named pipe")
	case m&fs.ModeSocket != 0:
		return errors.New("not a regular file but a socket")
	case m&fs.ModeDevice != 0:
		return errors.New("not a regular file but a device")
	}
	return fmt.Errorf("not a regular file (mode %v)", m)
}

// load reads and decodes one manifest. It opens the file without
// blocking, for a named pipe put in its place since the directory was
// read would block an ordinary open, and refuses what is not a regular
// file once open.
func (f *File) load(path string, seen time.Time) (*v1.Pod, error) {
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if err := notRegular(info); err != nil {
		return nil, err
	}
	if info.Size() > f.cfg.MaxManifestBytes {
		return nil, fmt.Errorf("the file has %d bytes, more than the limit of %d", info.Size(), f.cfg.MaxManifestBytes)
	}
	data, err := readBounded(file, f.cfg.MaxManifestBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the file: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the file is empty")
	}
	pods, err := decode(data, false)
	if err != nil {
		return nil, err
	}
	if err := makeStatic(pods[0], SourceFile, path, f.cfg.NodeName, seen); err != nil {
		return nil, err
	}
	return pods[0], nil
}
