package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// LogOptions are the query parameters of /containerLogs, as the kubelet
// reads them (v1.PodLogOptions).
type LogOptions struct {
	// Follow streams the log as it grows, until the container stops or
	// the client goes.
	Follow bool
	// Previous reads the log of the container's previous instance.
	Previous bool
	// Timestamps puts each line's RFC3339Nano time before it.
	Timestamps bool
	// TailLines, when not nil, starts at that many lines from the end.
	TailLines *int64
	// LimitBytes, when not nil, stops after that many bytes of output.
	LimitBytes *int64
	// Since drops lines written before it (sinceSeconds or sinceTime).
	Since time.Time
}

// parseLogOptions reads q as the kubelet does ("tail" is the old name of
// tailLines; "all" means every line). A value that does not parse is
// errBadQuery (400), one that parses but is out of range or conflicts
// with another is errInvalid (422).
func parseLogOptions(q map[string][]string, now time.Time) (LogOptions, error) {
	get := func(k string) (string, bool) {
		v, ok := q[k]
		if !ok || len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
	var o LogOptions
	var err error
	for _, b := range []struct {
		key string
		dst *bool
	}{{"follow", &o.Follow}, {"previous", &o.Previous}, {"timestamps", &o.Timestamps}} {
		if v, ok := get(b.key); ok {
			if *b.dst, err = strconv.ParseBool(v); err != nil {
				return o, fmt.Errorf("%w: %s=%q", errBadQuery, b.key, v)
			}
		}
	}
	tail, ok := get("tailLines")
	if t, tok := get("tail"); tok {
		tail, ok = t, t != "all"
	}
	if ok {
		n, err := strconv.ParseInt(tail, 10, 64)
		if err != nil {
			return o, fmt.Errorf("%w: tailLines=%q", errBadQuery, tail)
		}
		if n < 0 {
			return o, fmt.Errorf("%w: tailLines %d is negative", errInvalid, n)
		}
		o.TailLines = &n
	}
	if v, ok := get("limitBytes"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return o, fmt.Errorf("%w: limitBytes=%q", errBadQuery, v)
		}
		if n < 1 {
			return o, fmt.Errorf("%w: limitBytes %d is not positive", errInvalid, n)
		}
		o.LimitBytes = &n
	}
	// Split streams are an alpha feature of the kubelet, off by default:
	// only All is served, as the kubelet serves it then.
	if v, ok := get("stream"); ok && v != "All" {
		return o, fmt.Errorf("%w: unable to return the given log stream: %q", errBadQuery, v)
	}
	secs, hasSecs := get("sinceSeconds")
	since, hasTime := get("sinceTime")
	if hasSecs && hasTime {
		return o, fmt.Errorf("%w: sinceSeconds and sinceTime are both set", errInvalid)
	}
	if hasSecs {
		n, err := strconv.ParseInt(secs, 10, 64)
		if err != nil {
			return o, fmt.Errorf("%w: sinceSeconds=%q", errBadQuery, secs)
		}
		if n < 1 {
			return o, fmt.Errorf("%w: sinceSeconds %d is not positive", errInvalid, n)
		}
		o.Since = now.Add(-time.Duration(n) * time.Second)
	}
	if hasTime {
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			return o, fmt.Errorf("%w: sinceTime=%q", errBadQuery, since)
		}
		o.Since = t
	}
	return o, nil
}

var (
	errBadQuery = errors.New("unable to decode query")
	errInvalid  = errors.New("invalid request")
)

// containerLogs serves /containerLogs/{namespace}/{pod}/{container}.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := parseLogOptions(r.URL.Query(), s.cfg.Clock.Now())
	if errors.Is(err, errInvalid) {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, ok := s.findPod(ns, name, "")
	if !ok {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, name), http.StatusNotFound)
		return
	}
	if s.cfg.Runtime == nil {
		http.Error(w, "the runtime is not served here", http.StatusServiceUnavailable)
		return
	}
	st, err := s.cfg.Runtime.GetPodStatus(r.Context(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cs, err := logContainer(st, s.apiContainerStatus(pod, container), name, container, opts.Previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f, err := os.Open(cs.LogPath)
	if err != nil {
		http.Error(w, fmt.Sprintf("container %q in pod %q: opening its log: %v", container, name, err), http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	if opts.Follow {
		_ = rc.SetWriteDeadline(time.Time{}) // lasts until the container stops or the client goes
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	running := func(ctx context.Context) bool {
		st, err := s.cfg.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return false
		}
		for _, c := range st.ContainerStatuses {
			if c.ID == cs.ID {
				return c.State == runtime.ContainerStateRunning
			}
		}
		return false
	}
	err = s.copyLog(r.Context(), f, cs.LogPath, opts, &flushWriter{w: w, rc: rc}, running)
	if err != nil && r.Context().Err() == nil {
		s.cfg.Logger.V(2).Info("log stream ended", "pod", ns+"/"+name, "container", container, "err", err)
	}
}

type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) { return f.w.Write(p) }
func (f *flushWriter) Flush() error                { return f.rc.Flush() }

func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// apiContainerStatus returns the container's API status, from a
// PodStatusGetter or the status the pod was listed with; nil when there
// is none.
func (s *Server) apiContainerStatus(pod *v1.Pod, container string) *v1.ContainerStatus {
	status := &pod.Status
	if g, ok := s.cfg.Pods.(PodStatusGetter); ok {
		st, ok := g.PodStatus(pod.UID)
		if !ok {
			return nil
		}
		status = &st
	}
	for _, list := range [][]v1.ContainerStatus{status.ContainerStatuses, status.InitContainerStatuses, status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == container {
				return &list[i]
			}
		}
	}
	return nil
}

// logContainer picks the instance whose log is read, as the kubelet does:
// the newest that has run (a created one not yet started gives way to the
// one before it); with previous, the one the API status names as the last
// terminated (api, when known), else the one before the newest.
func logContainer(st *runtime.PodStatus, api *v1.ContainerStatus, pod, container string, previous bool) (*runtime.ContainerStatus, error) {
	if previous && api != nil {
		last := api.LastTerminationState.Terminated
		if last == nil || last.ContainerID == "" {
			return nil, fmt.Errorf("previous terminated container %q in pod %q not found", container, pod)
		}
		id, err := runtime.ParseContainerID(last.ContainerID)
		if err != nil {
			return nil, fmt.Errorf("previous terminated container %q in pod %q: %w", container, pod, err)
		}
		for _, c := range st.ContainerStatusesByName(container) {
			if c.ID == id {
				if c.LogPath == "" {
					return nil, fmt.Errorf("container %q in pod %q has no log file", container, pod)
				}
				return c, nil
			}
		}
		return nil, fmt.Errorf("previous terminated container %q in pod %q not found", container, pod)
	}
	all := st.ContainerStatusesByName(container)
	if len(all) > 0 && all[0].State == runtime.ContainerStateCreated && all[0].StartedAt.IsZero() {
		if len(all) == 1 && !previous {
			return nil, fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating", container, pod)
		}
		if !previous {
			all = all[1:]
		}
	}
	if previous {
		if len(all) < 2 {
			return nil, fmt.Errorf("previous terminated container %q in pod %q not found", container, pod)
		}
		all = all[1:]
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", container, pod)
	}
	if all[0].LogPath == "" {
		return nil, fmt.Errorf("container %q in pod %q has no log file", container, pod)
	}
	return all[0], nil
}

// errLimit ends a copy once LimitBytes were written.
var errLimit = errors.New("limitBytes reached")

// limitWriter passes on at most n bytes, then fails with errLimit.
type limitWriter struct {
	w io.Writer
	n int64 // < 0: no limit
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n < 0 {
		return l.w.Write(p)
	}
	if l.n == 0 {
		return 0, errLimit
	}
	cut := false
	if int64(len(p)) > l.n {
		p, cut = p[:l.n], true
	}
	n, err := l.w.Write(p)
	l.n -= int64(n)
	if err == nil && (cut || l.n == 0) {
		err = errLimit
	}
	return n, err
}

// copyLog writes the CRI log f (at path) to w as opts ask: from tailLines
// from the end, lines before Since dropped, at most LimitBytes, and with
// Follow on, waiting for more until running reports the container
// stopped or ctx ends. A rotated file (renamed, a new one created at
// path) is read to its end and then the new one from its start. Memory is
// bounded by the read buffer, whatever the length of a line. It closes f,
// and the files it opens after it.
func (s *Server) copyLog(ctx context.Context, f *os.File, path string, opts LogOptions, w *flushWriter, running func(context.Context) bool) error {
	defer func() { _ = f.Close() }()
	if opts.TailLines != nil {
		off, err := tailOffset(f, *opts.TailLines)
		if err != nil {
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
	}
	limit := int64(-1)
	if opts.LimitBytes != nil {
		limit = *opts.LimitBytes
	}
	p := &criParser{out: &limitWriter{w: w, n: limit}, opts: opts, buf: make([]byte, logBufferSize), lineStart: true, newline: [1]byte{'\n'}}
	var watcher *fsnotify.Watcher
	// The state check's ticker lives as long as the follow: one made per
	// wait would cost a timer per write, and a tick that came as a write
	// ended the wait would be lost.
	var check clock.Ticker
	checked := false
	defer func() {
		if watcher != nil {
			_ = watcher.Close()
		}
		if check != nil {
			check.Stop()
		}
	}()
	for {
		err := p.readAll(f)
		_ = w.Flush()
		if errors.Is(err, errLimit) {
			return nil
		}
		if err != nil || !opts.Follow {
			return err
		}
		if watcher == nil {
			if watcher, err = fsnotify.NewWatcher(); err != nil {
				return err
			}
			if err := watcher.Add(filepath.Dir(path)); err != nil {
				return err
			}
			continue // read what was written before the watch began
		}
		// The runtime is asked whether the container runs once at the
		// first pause (a stopped container's log ends at once), then every
		// LogStateCheckPeriod while waiting, not at each write.
		stopped := !checked && !running(ctx)
		checked = true
		var rotated bool
		if !stopped {
			if check == nil {
				check = s.cfg.Clock.NewTicker(s.cfg.LogStateCheckPeriod)
			}
			if rotated, stopped, err = s.waitLog(ctx, watcher, check, path, running); err != nil {
				return err
			}
		}
		if stopped {
			err := p.readAll(f) // what it wrote before it stopped
			_ = w.Flush()
			if errors.Is(err, errLimit) {
				return nil
			}
			return err
		}
		if rotated && !replaced(f, path) {
			continue // an event about the file already open
		}
		if rotated {
			if err := p.readAll(f); err != nil { // the rest of the old file
				_ = w.Flush()
				if errors.Is(err, errLimit) {
					return nil
				}
				return err
			}
			nf, err := os.Open(path)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue // removed, not yet recreated: wait on the old one
				}
				return err
			}
			_ = f.Close()
			f = nf
			p.reset()
		}
	}
}

// replaced reports whether path names a file other than f now.
func replaced(f *os.File, path string) bool {
	cur, err := f.Stat()
	if err != nil {
		return true
	}
	now, err := os.Stat(path)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	return !os.SameFile(cur, now)
}

// waitLog waits for the log at path to grow or be replaced (rotated
// true), for ctx to end (an error), or for a state check, at each tick of
// t, to find the container stopped (stopped true).
func (s *Server) waitLog(ctx context.Context, watcher *fsnotify.Watcher, t clock.Ticker, path string, running func(context.Context) bool) (rotated, stopped bool, err error) {
	for {
		select {
		case <-ctx.Done():
			return false, false, ctx.Err()
		case ev, ok := <-watcher.Events:
			if !ok {
				return false, false, errors.New("the log watch ended")
			}
			if filepath.Clean(ev.Name) != filepath.Clean(path) {
				continue
			}
			if ev.Has(fsnotify.Write) {
				return false, false, nil
			}
			if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Remove) {
				return true, false, nil
			}
		case err, ok := <-watcher.Errors:
			if !ok {
				return false, false, errors.New("the log watch ended")
			}
			s.cfg.Logger.V(2).Info("log watch error", "path", path, "err", err)
			return false, false, nil // read again; nothing is lost
		case <-t.C():
			if !running(ctx) {
				return false, true, nil
			}
		}
	}
}

// logBufferSize is the read buffer of a log copy: the most memory one
// copy holds, whatever the length of a line.
const logBufferSize = 32 << 10

// maxHeader bounds the "<time> <stream> <tag> " prefix of a CRI log line;
// a line whose prefix is longer is malformed and skipped.
const maxHeader = 128

// criParser turns CRI log lines ("<RFC3339Nano> <stdout|stderr> <P|F>
// <content>") into their content, joining partial (P) lines, streaming a
// line's content through its fixed buffer so that a line of any length
// takes no more memory.
type criParser struct {
	out  *limitWriter
	opts LogOptions
	buf  []byte
	r, n int // unread bytes are buf[r:n]

	inLine    bool // the current line's prefix was read; its content follows
	skip      bool // the current line is dropped (before Since, or malformed)
	partial   bool // the current line is a P line
	lineStart bool // the next content begins a line of output

	newline [1]byte // "\n", written without an allocation
	stamp   []byte  // the timestamp prefix, reused
}

// reset forgets a line left unfinished at the end of a rotated file.
func (p *criParser) reset() {
	p.r, p.n = 0, 0
	p.inLine, p.skip = false, false
}

// readAll parses f to its end. An incomplete prefix stays buffered for
// the next call; the content of an incomplete line has been written.
func (p *criParser) readAll(f io.Reader) error {
	for {
		if err := p.parse(); err != nil {
			return err
		}
		if p.r > 0 {
			p.n = copy(p.buf, p.buf[p.r:p.n])
			p.r = 0
		}
		m, err := f.Read(p.buf[p.n:])
		p.n += m
		if m == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// parse consumes what it can of buf[r:n].
func (p *criParser) parse() error {
	for p.r < p.n {
		data := p.buf[p.r:p.n]
		if !p.inLine {
			ok, err := p.header(data)
			if err != nil {
				return err
			}
			if !ok {
				return nil // need more bytes
			}
			continue
		}
		i := bytes.IndexByte(data, '\n')
		content := data
		if i >= 0 {
			content = data[:i]
		}
		if !p.skip && len(content) > 0 {
			if _, err := p.out.Write(content); err != nil {
				return err
			}
		}
		if i < 0 {
			p.r = p.n
			return nil
		}
		p.r += i + 1
		p.inLine = false
		if p.skip {
			continue
		}
		if !p.partial {
			if _, err := p.out.Write(p.newline[:]); err != nil {
				return err
			}
		}
		p.lineStart = !p.partial
	}
	return nil
}

// header reads a line's prefix from data; ok false means it needs more.
func (p *criParser) header(data []byte) (ok bool, err error) {
	end := bytes.IndexByte(data, '\n')
	line := data
	if end >= 0 {
		line = data[:end]
	}
	// Three spaces end the prefix; a line may also be "<time> <stream> <tag>"
	// with no content and no space after the tag.
	fields := make([][]byte, 0, 3)
	rest := line
	for len(fields) < 3 {
		j := bytes.IndexByte(rest, ' ')
		if j < 0 {
			if end >= 0 && len(fields) == 2 {
				fields = append(fields, rest)
				rest = nil
				break
			}
			if end < 0 && len(line) < maxHeader {
				return false, nil
			}
			p.startLine(true, false) // malformed: skip it
			return true, nil
		}
		fields = append(fields, rest[:j])
		rest = rest[j+1:]
	}
	consumed := len(line) - len(rest)
	ts, terr := time.Parse(time.RFC3339Nano, string(fields[0]))
	stream := string(fields[1])
	tag := fields[2]
	if k := bytes.IndexByte(tag, ':'); k >= 0 {
		tag = tag[:k]
	}
	if terr != nil || (stream != "stdout" && stream != "stderr") || (string(tag) != "P" && string(tag) != "F") {
		p.startLine(true, false)
		return true, nil
	}
	p.r += consumed
	skip := ts.Before(p.opts.Since)
	p.startLine(skip, string(tag) == "P")
	if !skip && p.opts.Timestamps && p.lineStart {
		p.stamp = append(ts.AppendFormat(p.stamp[:0], time.RFC3339Nano), ' ')
		if _, err := p.out.Write(p.stamp); err != nil {
			return true, err
		}
	}
	return true, nil
}

func (p *criParser) startLine(skip, partial bool) {
	p.inLine, p.skip, p.partial = true, skip, partial
}

// tailOffset returns where the last n lines of f begin, reading it
// backwards a block at a time.
func tailOffset(f io.ReadSeeker, n int64) (int64, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return size, nil
	}
	buf := make([]byte, 8<<10)
	pos := size
	seen := int64(0)
	first := true // the file's last byte: a final newline ends, not begins, a line
	for pos > 0 {
		m := int64(len(buf))
		if pos < m {
			m = pos
		}
		pos -= m
		if _, err := f.Seek(pos, io.SeekStart); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(f, buf[:m]); err != nil {
			return 0, err
		}
		for i := m - 1; i >= 0; i-- {
			if first {
				first = false
				if buf[i] == '\n' {
					continue
				}
			}
			if buf[i] == '\n' {
				seen++
				if seen == n {
					return pos + i + 1, nil
				}
			}
		}
	}
	return 0, nil
}
