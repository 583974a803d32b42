package cri

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime/criclient"
)

// Defaults of LogRotatorConfig, the kubelet's (containerLogMaxSize,
// containerLogMaxFiles, containerLogMonitorInterval,
// containerLogMaxWorkers).
const (
	DefaultContainerLogMaxSize    = 10 * 1024 * 1024 // 10Mi
	DefaultContainerLogMaxFiles   = 5
	DefaultLogRotatePeriod        = 10 * time.Second
	DefaultContainerLogMaxWorkers = 1
)

// rotatedSuffixFormat is the time layout of the suffix a rotated log gets
// ("<log>.20060102-150405"), the kubelet's.
const rotatedSuffixFormat = "20060102-150405"

// Suffixes of compressed rotated logs and of files being compressed.
const (
	gzSuffix  = ".gz"
	tmpSuffix = ".tmp"
)

// LogRuntime is what a LogRotator needs of a CRI runtime: the running
// containers, where their logs are, and a way to have the runtime reopen
// a log it was writing. criapi.RuntimeService implements it. A LogRuntime
// that is also a criclient.BriefLister (*criclient.Client is) is listed
// in brief, without decoding each container's labels and annotations.
type LogRuntime interface {
	// ListContainers lists the containers that match filter.
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	// ContainerStatus returns a container's status, whose LogPath is
	// the container's log file.
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	// ReopenContainerLog makes the runtime close the container's log
	// file and create it again at its path.
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// LogRotatorConfig configures a LogRotator. The zero value of each field
// means its default.
type LogRotatorConfig struct {
	// Runtime lists containers and reopens their logs. Required.
	Runtime LogRuntime
	// MaxSize is the size in bytes beyond which a container's log is
	// rotated; 0 means DefaultContainerLogMaxSize (10Mi). Negative is an
	// error: a caller that wants no rotation does not run a LogRotator.
	MaxSize int64
	// MaxFiles is the most files a container's log may take, the live
	// one included; 0 means DefaultContainerLogMaxFiles (5). It must be
	// at least 2.
	MaxFiles int
	// Period is how often the running containers are listed and queued
	// for a check (the kubelet's containerLogMonitorInterval); 0 means
	// DefaultLogRotatePeriod (10 s).
	Period time.Duration
	// MaxWorkers is how many containers' logs are checked and rotated at
	// once (the kubelet's containerLogMaxWorkers); 0 means
	// DefaultContainerLogMaxWorkers (1). Negative is an error.
	MaxWorkers int
	// Clock times the checks and names rotated files; nil means the
	// real clock.
	Clock clock.WithTicker
	// Logger receives the failures of single containers, which do not
	// stop rotation; the zero value discards them.
	Logger logr.Logger
	// LogsDir is the root of the pod log directories (the runtime's
	// Config.PodLogsDir): a log the runtime reports elsewhere, or behind
	// a symlink out of it, is neither rotated nor pruned, and the
	// container's check fails saying so. Default DefaultPodLogsDir.
	LogsDir string
}

// LogRotator rotates the log files of running CRI containers as the
// kubelet's container log manager does: a log bigger than MaxSize is
// renamed to "<log>.<YYYYMMDD-hhmmss>" and the runtime asked to reopen
// it; rotated files but the newest are gzipped, and the oldest removed so
// that at most MaxFiles remain: the newest rotated file stays plain
// text.
//
// Run works as the kubelet's manager does: every Period it lists the
// running containers into a queue that holds each container once, and
// MaxWorkers workers take containers from it, so that a slow rotation
// (a big log to compress) holds up neither the next listing nor the other
// containers, and a container is never rotated by two workers at once.
// Its methods are safe for concurrent use; a container that one call is
// rotating is skipped by another.
//
// A container's log path never changes, so it is asked of the runtime
// (ContainerStatus) once per container and remembered while the
// container is listed as running; the runtime is asked again only when a
// log has grown past MaxSize, to check that its container still runs
// before the rotation. A check of unchanged containers thus costs one
// list call and a stat per log; Run lists into the memory of its last
// listing (TestLogRotatorRunListsIntoTheSameMemory).
type LogRotator struct {
	cfg LogRotatorConfig
	log logr.Logger

	// mu guards busy, the containers being checked or rotated, and
	// paths, the log paths of running containers ("" if one has none).
	mu    sync.Mutex
	busy  map[string]bool
	paths map[string]string
}

// listMemory is the memory that one caller's listings of the running
// containers reuse from one to the next (Run keeps one for its loop):
// the brief list's buffer, the IDs and the set of them.
type listMemory struct {
	buf     criclient.BriefBuffer
	ids     []string
	running map[string]bool
}

// NewLogRotator checks and defaults cfg. It starts nothing and does no
// I/O. It returns an error naming the field when cfg is invalid.
func NewLogRotator(cfg LogRotatorConfig) (*LogRotator, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("cri: LogRotatorConfig.Runtime is required")
	}
	switch {
	case cfg.MaxSize == 0:
		cfg.MaxSize = DefaultContainerLogMaxSize
	case cfg.MaxSize < 0:
		return nil, fmt.Errorf("cri: LogRotatorConfig.MaxSize is %d, must not be negative", cfg.MaxSize)
	}
	switch {
	case cfg.MaxFiles == 0:
		cfg.MaxFiles = DefaultContainerLogMaxFiles
	case cfg.MaxFiles < 2:
		return nil, fmt.Errorf("cri: LogRotatorConfig.MaxFiles is %d, must be at least 2", cfg.MaxFiles)
	}
	switch {
	case cfg.MaxWorkers == 0:
		cfg.MaxWorkers = DefaultContainerLogMaxWorkers
	case cfg.MaxWorkers < 0:
		return nil, fmt.Errorf("cri: LogRotatorConfig.MaxWorkers is %d, must be at least 1", cfg.MaxWorkers)
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultLogRotatePeriod
	} else if cfg.Period < 0 {
		return nil, fmt.Errorf("cri: LogRotatorConfig.Period is %v, must be positive", cfg.Period)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.LogsDir == "" {
		cfg.LogsDir = DefaultPodLogsDir
	} else if !filepath.IsAbs(cfg.LogsDir) {
		return nil, fmt.Errorf("cri: LogRotatorConfig.LogsDir %q is not absolute", cfg.LogsDir)
	}
	log := cfg.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	return &LogRotator{cfg: cfg, log: log, busy: map[string]bool{}, paths: map[string]string{}}, nil
}

// Run lists the running containers every Period into a queue, and
// checks and rotates their logs on MaxWorkers goroutines, until ctx ends;
// then it returns nil once its goroutines have. Failures are logged and
// retried at the next listing.
func (r *LogRotator) Run(ctx context.Context) error {
	q := newIDQueue()
	var wg sync.WaitGroup
	for range r.cfg.MaxWorkers {
		wg.Go(func() {
			for {
				id, ok := q.get(ctx)
				if !ok {
					return
				}
				r.check(ctx, id)
			}
		})
	}
	defer wg.Wait()
	var mem listMemory
	t := r.cfg.Clock.NewTicker(r.cfg.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			ids, err := r.running(ctx, &mem)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error(err, "rotating container logs")
				}
				continue
			}
			for _, id := range ids {
				q.add(id)
			}
		}
	}
}

// RotateLogs makes one pass over the running containers, rotating the
// logs that grew beyond MaxSize, MaxWorkers at a time. It blocks for the
// pass. It returns an error only when the containers cannot be listed;
// the failure of one container is logged and the others are still
// handled.
func (r *LogRotator) RotateLogs(ctx context.Context) error {
	ids, err := r.running(ctx, nil)
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(r.cfg.MaxWorkers)
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			r.check(ctx, id)
			return nil
		})
	}
	return g.Wait()
}

// running lists the IDs of the running containers: in brief (only IDs
// and states decoded) when the runtime is a criclient.BriefLister, as
// *criclient.Client is. The log paths of containers no longer running
// are forgotten. With mem, the listing is made in its memory, and the
// IDs returned are valid until the next listing in it; without, in new
// memory.
func (r *LogRotator) running(ctx context.Context, mem *listMemory) ([]string, error) {
	filter := &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}
	var (
		buf     *criclient.BriefBuffer
		ids     []string
		running map[string]bool
	)
	if mem != nil {
		buf, ids, running = &mem.buf, mem.ids[:0], mem.running
		defer func() {
			// Memory made for far more containers than run now is let
			// go: a map never shrinks.
			if cap(ids) > 4*max(len(ids), 64) {
				ids, running = nil, nil
			}
			mem.ids, mem.running = ids, running
		}()
	}
	if bl, ok := r.cfg.Runtime.(criclient.BriefLister); ok {
		cs, err := bl.ListContainersBrief(ctx, filter, criclient.ListKeys{}, buf)
		if err != nil {
			return nil, fmt.Errorf("cri: log rotation: listing containers: %w", err)
		}
		for _, c := range cs {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING { // a runtime may ignore the filter
				ids = append(ids, c.ID)
			}
		}
	} else {
		cs, err := r.cfg.Runtime.ListContainers(ctx, filter)
		if err != nil {
			return nil, fmt.Errorf("cri: log rotation: listing containers: %w", err)
		}
		for _, c := range cs {
			if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				ids = append(ids, c.GetId())
			}
		}
	}
	if running == nil {
		running = make(map[string]bool, len(ids))
	}
	clear(running)
	for _, id := range ids {
		running[id] = true
	}
	r.mu.Lock()
	for id := range r.paths {
		if !running[id] {
			delete(r.paths, id)
		}
	}
	r.mu.Unlock()
	return ids, nil
}

// check rotates one container's log if it is too big, unless another
// call is at it; a failure is logged.
func (r *LogRotator) check(ctx context.Context, id string) {
	r.mu.Lock()
	if r.busy[id] {
		r.mu.Unlock()
		return
	}
	r.busy[id] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.busy, id)
		r.mu.Unlock()
	}()
	if err := r.rotateContainer(ctx, id); err != nil && ctx.Err() == nil {
		r.log.Error(err, "rotating container log", "containerID", id)
	}
}

// idQueue is a FIFO of container IDs that holds each ID once: one added
// again while it waits keeps its place. Its length is bounded by the
// number of distinct containers. Safe for concurrent use.
type idQueue struct {
	// wake has a token when an ID may be waiting.
	wake chan struct{}
	// mu guards ids and queued.
	mu     sync.Mutex
	ids    []string
	queued map[string]bool
}

func newIDQueue() *idQueue {
	return &idQueue{wake: make(chan struct{}, 1), queued: map[string]bool{}}
}

// add queues id unless it is waiting already. It does not block.
func (q *idQueue) add(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued[id] {
		return
	}
	q.queued[id] = true
	q.ids = append(q.ids, id)
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// get takes the oldest ID, blocking until there is one; false when ctx
// ends first.
func (q *idQueue) get(ctx context.Context) (string, bool) {
	for {
		q.mu.Lock()
		if len(q.ids) > 0 {
			id := q.ids[0]
			q.ids[0] = ""
			q.ids = q.ids[1:]
			delete(q.queued, id)
			if len(q.ids) > 0 { // pass the token on to another worker
				select {
				case q.wake <- struct{}{}:
				default:
				}
			}
			q.mu.Unlock()
			return id, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", false
		case <-q.wake:
		}
	}
}

// logPath returns the log path of a running container: remembered, or
// (ask, or not known) asked of the runtime, which fresh reports. ok is
// false when the container no longer runs.
func (r *LogRotator) logPath(ctx context.Context, id string, ask bool) (path string, ok, fresh bool, err error) {
	if !ask {
		r.mu.Lock()
		path, known := r.paths[id]
		r.mu.Unlock()
		if known {
			return path, true, false, nil
		}
	}
	resp, err := r.cfg.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return "", false, true, fmt.Errorf("cri: log rotation: container status: %w", err)
	}
	st := resp.GetStatus()
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Lock()
		delete(r.paths, id)
		r.mu.Unlock()
		return "", false, true, nil // stopped since the list
	}
	path = st.GetLogPath()
	r.mu.Lock()
	r.paths[id] = path
	r.mu.Unlock()
	return path, true, true, nil
}

// rotateContainer rotates one container's log when it is too big.
func (r *LogRotator) rotateContainer(ctx context.Context, id string) error {
	path, ok, fresh, err := r.logPath(ctx, id, false)
	if err != nil || !ok || path == "" {
		return err
	}
	size, err := logSize(path)
	if errors.Is(err, os.ErrNotExist) {
		// Lost (removed by hand, or a reopen that failed): have the
		// runtime create it again.
		if err := r.cfg.Runtime.ReopenContainerLog(ctx, id); err != nil {
			return fmt.Errorf("cri: log rotation: reopening missing log %s: %w", path, err)
		}
		size, err = logSize(path)
	}
	if err != nil {
		return fmt.Errorf("cri: log rotation: %w", err)
	}
	if size < r.cfg.MaxSize {
		return nil
	}
	// About to rotate: the container must still run (a stopped one's
	// log is left whole, and its runtime could not reopen it). A path
	// remembered from an earlier check is checked again.
	if !fresh {
		if _, ok, _, err := r.logPath(ctx, id, true); err != nil || !ok {
			return err
		}
	}
	// The files about to be renamed and removed are the runtime's word:
	// they must lie within a pod's log directory, as GC's must.
	if err := underDir(r.cfg.LogsDir, path, 2); err != nil {
		return fmt.Errorf("cri: log rotation: container %s: not rotating a log outside the pod logs directory: %w", id, err)
	}
	if err := r.prune(path); err != nil {
		return err
	}
	if err := r.compress(path); err != nil {
		return err
	}
	return r.rotate(ctx, id, path)
}

// rotated returns the rotated files of the log at path, oldest first,
// leaving out files being compressed. The timestamp suffix sorts as
// time does.
func rotated(path string) ([]string, error) {
	names, err := filepath.Glob(escapeGlob(path) + ".*")
	if err != nil {
		return nil, fmt.Errorf("cri: log rotation: %w", err)
	}
	out := names[:0]
	for _, n := range names {
		if !strings.HasSuffix(n, tmpSuffix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// escapeGlob quotes the glob metacharacters of a literal path.
func escapeGlob(p string) string {
	var sb strings.Builder
	for _, c := range p {
		if strings.ContainsRune(`*?[\`, c) {
			sb.WriteByte('\\')
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

// prune removes leftover temporary files and the oldest rotated files,
// keeping room for the one about to be rotated: MaxFiles-2 rotated files
// remain, plus the live log and the next rotated one.
func (r *LogRotator) prune(path string) error {
	tmps, _ := filepath.Glob(escapeGlob(path) + ".*" + tmpSuffix)
	var errs []error
	for _, t := range tmps { // an interrupted compression
		if err := os.Remove(t); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	old, err := rotated(path)
	if err != nil {
		return err
	}
	keep := r.cfg.MaxFiles - 2
	for i := 0; i < len(old)-keep; i++ {
		if err := os.Remove(old[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cri: log rotation: removing old logs: %w", err)
	}
	return nil
}

// compress gzips every rotated file of the log, before the live log is
// rotated: the newest rotated file is thus the only plain one.
func (r *LogRotator) compress(path string) error {
	old, err := rotated(path)
	if err != nil {
		return err
	}
	for _, f := range old {
		if strings.HasSuffix(f, gzSuffix) {
			continue
		}
		if err := gzipFile(f); err != nil {
			return fmt.Errorf("cri: log rotation: compressing %s: %w", f, err)
		}
	}
	return nil
}

// gzipFile replaces name with name.gz, writing through a temporary file
// so that an interruption never leaves a truncated .gz.
func gzipFile(name string) (err error) {
	in, err := os.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := name + gzSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	zw := gzip.NewWriter(out)
	_, cerr := io.Copy(zw, in)
	if err := errors.Join(cerr, zw.Close(), out.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, name+gzSuffix); err != nil {
		return err
	}
	return os.Remove(name)
}

// rotate renames the live log to its timestamped name and has the
// runtime reopen it; when the runtime cannot, the rename is undone so the
// runtime keeps writing to the path it knows.
func (r *LogRotator) rotate(ctx context.Context, id, path string) error {
	to := path + "." + r.cfg.Clock.Now().Format(rotatedSuffixFormat)
	if err := os.Rename(path, to); err != nil {
		return fmt.Errorf("cri: log rotation: %w", err)
	}
	if err := r.cfg.Runtime.ReopenContainerLog(ctx, id); err != nil {
		if rerr := os.Rename(to, path); rerr != nil {
			return fmt.Errorf("cri: log rotation: reopening log: %w (renaming back: %v)", err, rerr)
		}
		return fmt.Errorf("cri: log rotation: reopening log: %w", err)
	}
	r.log.V(2).Info("rotated container log", "containerID", id, "path", to)
	return nil
}
