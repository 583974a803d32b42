package cri_test

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// logRuntime is a LogRuntime over real files: containers with a state and
// a log path; ReopenContainerLog creates the log again, or fails.
type logRuntime struct {
	mu        sync.Mutex
	states    map[string]runtimeapi.ContainerState
	paths     map[string]string
	reopenErr error
	reopens   []string
	// statusCalls counts ContainerStatus calls; stoppedNow makes
	// ContainerStatus report a listed container exited (it stopped
	// between the list and the status).
	statusCalls int
	stoppedNow  map[string]bool
}

func newLogRuntime() *logRuntime {
	return &logRuntime{states: map[string]runtimeapi.ContainerState{}, paths: map[string]string{}}
}

func (f *logRuntime) add(id, path string, st runtimeapi.ContainerState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[id], f.paths[id] = st, path
}

func (f *logRuntime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.Container
	for id, st := range f.states {
		if filter.GetState() != nil && filter.GetState().GetState() != st {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: id, State: st})
	}
	return out, nil
}

func (f *logRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statusCalls++
	st := f.states[id]
	if f.stoppedNow[id] {
		st = runtimeapi.ContainerState_CONTAINER_EXITED
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{
		Id: id, State: st, LogPath: f.paths[id],
	}}, nil
}

func (f *logRuntime) ReopenContainerLog(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reopens = append(f.reopens, id)
	if f.reopenErr != nil {
		return f.reopenErr
	}
	return os.WriteFile(f.paths[id], nil, 0o644)
}

// listDir returns the names of the files in dir, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readGzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var rotateStart = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// anyLogsDir is the LogsDir of the tests whose logs lie in temporary
// directories anywhere; TestLogRotatorLeavesLogsOutsideLogsDir checks
// LogsDir itself.
const anyLogsDir = "/"

func newRotator(t *testing.T, rt cri.LogRuntime, clk *clocktesting.FakeClock, maxSize int64, maxFiles int) *cri.LogRotator {
	t.Helper()
	r, err := cri.NewLogRotator(cri.LogRotatorConfig{Runtime: rt, MaxSize: maxSize, MaxFiles: maxFiles, Clock: clk, LogsDir: anyLogsDir})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLogRotatorRotatesAtSizeCompressesAndPrunes(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := newLogRuntime()
	rt.add("c1", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	clk := clocktesting.NewFakeClock(rotateStart)
	r := newRotator(t, rt, clk, 10, 3)
	ctx := context.Background()

	writeFile(t, log, "123456789") // 9 bytes: under the size
	if err := r.RotateLogs(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0.log"}, listDir(t, dir)); diff != "" {
		t.Fatalf("under MaxSize (-want +got):\n%s", diff)
	}

	// Each pass: the log reaches the size, one second later.
	for i, text := range []string{"first-log!", "second-log", "third-log!", "fourth-log"} {
		writeFile(t, log, text)
		clk.Step(time.Second)
		if err := r.RotateLogs(ctx); err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
	}
	// MaxFiles 3: the live log, the newest rotated one (plain), one
	// older (gzipped); the two oldest were removed.
	want := []string{"0.log", "0.log.20260304-050610.gz", "0.log.20260304-050611"}
	if diff := cmp.Diff(want, listDir(t, dir)); diff != "" {
		t.Fatalf("files (-want +got):\n%s", diff)
	}
	if got := readGzip(t, filepath.Join(dir, "0.log.20260304-050610.gz")); got != "third-log!" {
		t.Errorf("gzipped rotated log holds %q, want %q", got, "third-log!")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "0.log.20260304-050611")); string(b) != "fourth-log" {
		t.Errorf("newest rotated log holds %q, want %q", b, "fourth-log")
	}
	if b, _ := os.ReadFile(log); len(b) != 0 {
		t.Errorf("live log after reopen holds %q, want it empty", b)
	}
}

func TestLogRotatorDefaultKeepsFiveFiles(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := newLogRuntime()
	rt.add("c1", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	clk := clocktesting.NewFakeClock(rotateStart)
	r := newRotator(t, rt, clk, 1, 0)
	for i := range 8 {
		writeFile(t, log, "x")
		clk.Step(time.Minute)
		if err := r.RotateLogs(context.Background()); err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
	}
	got := listDir(t, dir)
	if len(got) != cri.DefaultContainerLogMaxFiles {
		t.Fatalf("%d files remain, want %d: %v", len(got), cri.DefaultContainerLogMaxFiles, got)
	}
	var gz int
	for _, n := range got {
		if strings.HasSuffix(n, ".gz") {
			gz++
		}
	}
	if gz != 3 {
		t.Errorf("%d gzipped files, want 3 (all rotated but the newest): %v", gz, got)
	}
}

func TestLogRotatorReopenFailureRenamesBack(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := newLogRuntime()
	rt.add("c1", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.reopenErr = errors.New("runtime cannot reopen")
	r := newRotator(t, rt, clocktesting.NewFakeClock(rotateStart), 4, 0)
	writeFile(t, log, "too big")
	if err := r.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0.log"}, listDir(t, dir)); diff != "" {
		t.Fatalf("files (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(log); string(b) != "too big" {
		t.Errorf("log holds %q after a failed reopen, want its old content", b)
	}
	if diff := cmp.Diff([]string{"c1"}, rt.reopens); diff != "" {
		t.Errorf("reopens (-want +got):\n%s", diff)
	}
}

// TestLogRotatorReopensAMissingLog: a running container's log that is
// gone (removed by hand) is created again by the runtime, and a log that
// is there but small is left alone, reopened never.
func TestLogRotatorReopensAMissingLog(t *testing.T) {
	dir := t.TempDir()
	lost, small := filepath.Join(dir, "0.log"), filepath.Join(dir, "1.log")
	rt := newLogRuntime()
	rt.add("lost", lost, runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.add("small", small, runtimeapi.ContainerState_CONTAINER_RUNNING)
	writeFile(t, small, "ok")
	r := newRotator(t, rt, clocktesting.NewFakeClock(rotateStart), 1024, 0)
	if err := r.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"lost"}, rt.reopens); diff != "" {
		t.Errorf("reopens (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"0.log", "1.log"}, listDir(t, dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestLogRotatorSkipsStoppedContainers(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := newLogRuntime()
	rt.add("c1", log, runtimeapi.ContainerState_CONTAINER_EXITED)
	r := newRotator(t, rt, clocktesting.NewFakeClock(rotateStart), 1, 0)
	writeFile(t, log, "big enough")
	if err := r.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0.log"}, listDir(t, dir)); diff != "" {
		t.Fatalf("files of an exited container (-want +got):\n%s", diff)
	}
	if len(rt.reopens) != 0 {
		t.Errorf("reopened %v, want nothing", rt.reopens)
	}
}

func TestLogRotatorAsksEachLogPathOnce(t *testing.T) {
	dir := t.TempDir()
	rt := newLogRuntime()
	for _, id := range []string{"c1", "c2", "c3"} {
		log := filepath.Join(dir, id+".log")
		writeFile(t, log, "small")
		rt.add(id, log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	}
	r := newRotator(t, rt, clocktesting.NewFakeClock(rotateStart), 1024, 0)
	for i := 0; i < 5; i++ {
		if err := r.RotateLogs(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if rt.statusCalls != 3 {
		t.Errorf("5 passes over 3 unchanged containers made %d ContainerStatus calls, want 3 (one per container)", rt.statusCalls)
	}

	// A container that stops is forgotten: listed again (a restart under
	// the same ID in a runtime that reuses them), its path is asked anew.
	rt.add("c1", filepath.Join(dir, "c1.log"), runtimeapi.ContainerState_CONTAINER_EXITED)
	if err := r.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt.add("c1", filepath.Join(dir, "c1-again.log"), runtimeapi.ContainerState_CONTAINER_RUNNING)
	writeFile(t, filepath.Join(dir, "c1-again.log"), "small")
	rt.statusCalls = 0
	if err := r.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rt.statusCalls != 1 {
		t.Errorf("a container listed again made %d ContainerStatus calls, want 1", rt.statusCalls)
	}
}

func TestLogRotatorChecksTheContainerRunsBeforeRotating(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := newLogRuntime()
	rt.add("c1", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	r := newRotator(t, rt, clocktesting.NewFakeClock(rotateStart), 8, 0)
	writeFile(t, log, "small")
	if err := r.RotateLogs(context.Background()); err != nil { // remembers the path
		t.Fatal(err)
	}
	// Grown past MaxSize, and stopped after the next list: left whole.
	writeFile(t, log, "big enough now")
	rt.stoppedNow = map[string]bool{"c1": true}
	if err := r.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0.log"}, listDir(t, dir)); diff != "" {
		t.Fatalf("files of a container that stopped (-want +got):\n%s", diff)
	}
	if len(rt.reopens) != 0 {
		t.Errorf("reopened %v, want nothing", rt.reopens)
	}
}

func TestLogRotatorRunRotatesEveryPeriod(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := newLogRuntime()
	rt.add("c1", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	clk := clocktesting.NewFakeClock(rotateStart)
	r := newRotator(t, rt, clk, 1, 0)
	writeFile(t, log, "big enough")
	runRotator(t, r, clk)
	clk.Step(cri.DefaultLogRotatePeriod - time.Second)
	if diff := cmp.Diff([]string{"0.log"}, listDir(t, dir)); diff != "" {
		t.Fatalf("before the period (-want +got):\n%s", diff)
	}
	clk.Step(time.Second)
	want := []string{"0.log", "0.log.20260304-050617"}
	waitFor(t, "the log rotated after a period", func() (bool, string) {
		got := listDir(t, dir)
		return cmp.Equal(want, got), fmt.Sprint(got)
	})
}

func TestNewLogRotatorRejectsBadConfig(t *testing.T) {
	rt := newLogRuntime()
	for _, tc := range []struct {
		name string
		cfg  cri.LogRotatorConfig
		want string
	}{
		{"no runtime", cri.LogRotatorConfig{}, "Runtime"},
		{"negative size", cri.LogRotatorConfig{Runtime: rt, MaxSize: -1}, "MaxSize"},
		{"one file", cri.LogRotatorConfig{Runtime: rt, MaxFiles: 1}, "MaxFiles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cri.NewLogRotator(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// briefLogRuntime is a logRuntime that lists in brief, as
// *criclient.Client does, and refuses the full list.
type briefLogRuntime struct {
	*logRuntime
	briefCalls int
	// bufs are the buffers the brief lists were given, in order.
	bufs []*criclient.BriefBuffer
}

func (b *briefLogRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return nil, errors.New("the full list was asked of a runtime that lists in brief")
}

func (b *briefLogRuntime) ListContainersBrief(ctx context.Context, f *runtimeapi.ContainerFilter, _ criclient.ListKeys, buf *criclient.BriefBuffer) ([]criclient.BriefContainer, error) {
	b.mu.Lock()
	b.briefCalls++
	b.bufs = append(b.bufs, buf)
	b.mu.Unlock()
	cs, err := b.logRuntime.ListContainers(ctx, f)
	var out []criclient.BriefContainer
	for _, c := range cs {
		out = append(out, criclient.BriefContainer{ID: c.Id, State: c.State})
	}
	return out, err
}

func (b *briefLogRuntime) ListPodSandboxBrief(context.Context, *runtimeapi.PodSandboxFilter, criclient.ListKeys, *criclient.BriefBuffer) ([]criclient.BriefSandbox, error) {
	return nil, errors.New("not used")
}

func TestLogRotatorListsInBriefWhenTheRuntimeCan(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := &briefLogRuntime{logRuntime: newLogRuntime()}
	rt.add("c1", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	r := newRotator(t, rt, clocktesting.NewFakeClock(rotateStart), 4, 0)
	writeFile(t, log, "too big")
	if err := r.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rt.briefCalls != 1 {
		t.Errorf("%d brief lists, want 1", rt.briefCalls)
	}
	if diff := cmp.Diff([]string{"0.log", "0.log." + rotateStart.Format("20060102-150405")}, listDir(t, dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// gatedRuntime is a logRuntime whose ContainerStatus of the containers in
// gated waits for a token on release, and which counts the checks in
// flight; ListContainers lists in ID order.
type gatedRuntime struct {
	*logRuntime
	gated   map[string]bool
	release chan struct{}

	mu       sync.Mutex
	inside   int
	maxSeen  int
	statuses map[string]int
}

func newGatedRuntime(gated ...string) *gatedRuntime {
	g := &gatedRuntime{logRuntime: newLogRuntime(), gated: map[string]bool{}, release: make(chan struct{}), statuses: map[string]int{}}
	for _, id := range gated {
		g.gated[id] = true
	}
	return g
}

func (g *gatedRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	out, err := g.logRuntime.ListContainers(ctx, f)
	sort.Slice(out, func(i, j int) bool { return out[i].GetId() < out[j].GetId() })
	return out, err
}

func (g *gatedRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	g.mu.Lock()
	g.inside++
	g.maxSeen = max(g.maxSeen, g.inside)
	g.statuses[id]++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inside--
		g.mu.Unlock()
	}()
	if g.gated[id] {
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.logRuntime.ContainerStatus(ctx, id, verbose)
}

func (g *gatedRuntime) state() (inside, maxSeen int, statuses map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside, g.maxSeen, maps.Clone(g.statuses)
}

// waitFor polls cond (bounded in time) and fails with what it last saw.
// runRotator runs r until the test ends, and returns once Run waits on
// clk.
func runRotator(t *testing.T, r *cri.LogRotator, clk *clocktesting.FakeClock) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, "Run waiting on its clock", func() (bool, string) { return clk.HasWaiters(), "no waiter" })
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s; saw %s", what, seen)
		}
		time.Sleep(time.Millisecond)
	}
}

// A pass checks MaxWorkers containers at once, no more: with 5 containers
// whose checks block and 2 workers, exactly 2 are in flight.
func TestLogRotatorBoundsItsWorkers(t *testing.T) {
	dir := t.TempDir()
	ids := []string{"c1", "c2", "c3", "c4", "c5"}
	rt := newGatedRuntime(ids...)
	for _, id := range ids {
		rt.add(id, filepath.Join(dir, id+".log"), runtimeapi.ContainerState_CONTAINER_RUNNING)
		writeFile(t, filepath.Join(dir, id+".log"), "big enough")
	}
	r, err := cri.NewLogRotator(cri.LogRotatorConfig{Runtime: rt, LogsDir: anyLogsDir, MaxSize: 1, MaxWorkers: 2, Clock: clocktesting.NewFakeClock(rotateStart)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.RotateLogs(context.Background()) }()
	// Each token ends one check; before each, as many checks as there
	// are workers (or containers left) are in flight.
	for i := range ids {
		want := min(2, len(ids)-i)
		waitFor(t, fmt.Sprintf("%d checks in flight", want), func() (bool, string) {
			inside, maxSeen, _ := rt.state()
			return inside >= want, fmt.Sprintf("%d in flight, at most %d", inside, maxSeen)
		})
		rt.release <- struct{}{}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, maxSeen, _ := rt.state(); maxSeen != 2 {
		t.Errorf("at most %d checks in flight, want MaxWorkers, 2", maxSeen)
	}
	if got := len(rt.reopens); got != len(ids) {
		t.Errorf("%d logs rotated, want %d", got, len(ids))
	}
}

// Run queues the running containers every Period: a container whose
// check is slow holds up neither the next listing nor the others, and is
// not checked twice at once.
func TestLogRotatorRunSlowContainerHoldsNoOther(t *testing.T) {
	dir := t.TempDir()
	rt := newGatedRuntime("a-slow")
	slow, fast := filepath.Join(dir, "slow.log"), filepath.Join(dir, "fast.log")
	rt.add("a-slow", slow, runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.add("b-fast", fast, runtimeapi.ContainerState_CONTAINER_RUNNING)
	writeFile(t, slow, "big enough")
	writeFile(t, fast, "big enough")
	clk := clocktesting.NewFakeClock(rotateStart)
	r, err := cri.NewLogRotator(cri.LogRotatorConfig{Runtime: rt, LogsDir: anyLogsDir, MaxSize: 1, MaxWorkers: 2, Period: 3 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	runRotator(t, r, clk)
	rotatedFast := func(n int) func() (bool, string) {
		return func() (bool, string) {
			files, _ := filepath.Glob(fast + ".*")
			return len(files) == n, fmt.Sprint(files)
		}
	}
	clk.Step(3 * time.Second)
	waitFor(t, "the fast log rotated once", rotatedFast(1))
	writeFile(t, fast, "big again")
	clk.Step(3 * time.Second)
	waitFor(t, "the fast log rotated again while the slow one is held", rotatedFast(2))
	if _, _, st := rt.state(); st["a-slow"] != 1 {
		t.Errorf("the slow container was checked %d times while its first check ran, want once", st["a-slow"])
	}
	rt.release <- struct{}{}
	waitFor(t, "the slow log rotated", func() (bool, string) {
		files, _ := filepath.Glob(slow + ".*")
		return len(files) == 1, fmt.Sprint(files)
	})
}

// reopeningWriter is a container that writes numbered lines to its log
// through an open file, which ReopenContainerLog replaces, as a CRI
// runtime's does: lines written between the rename and the reopen land in
// the rotated file.
type reopeningWriter struct {
	*logRuntime
	path string

	mu sync.Mutex
	f  *os.File
	n  int // lines written
}

func (w *reopeningWriter) ReopenContainerLog(_ context.Context, _ string) error {
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.f
	w.f = f
	return old.Close()
}

// burst writes the next 100 lines as fast as it can.
func (w *reopeningWriter) burst() error {
	for range 100 {
		w.mu.Lock()
		_, err := fmt.Fprintf(w.f, "line %d\n", w.n)
		w.n++
		w.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// Under a container that writes while its log is rotated, every line is
// kept, once and in order, across the live log and the rotated files,
// plain and gzipped.
func TestLogRotatorUnderAFastWriter(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	rt := &reopeningWriter{logRuntime: newLogRuntime(), path: log, f: f}
	defer func() { _ = rt.f.Close() }()
	rt.add("c1", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	clk := clocktesting.NewFakeClock(rotateStart)
	const maxSize = 4 << 10
	r, err := cri.NewLogRotator(cri.LogRotatorConfig{Runtime: rt, LogsDir: anyLogsDir, MaxSize: maxSize, MaxFiles: 1000, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	const passes = 30
	for i := range passes {
		for bursts := 0; ; bursts++ { // the log past MaxSize
			info, err := os.Stat(log)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size() >= maxSize {
				break
			}
			if bursts > 100 {
				t.Fatalf("pass %d: the log is %d bytes after %d bursts", i, info.Size(), bursts)
			}
			if err := rt.burst(); err != nil {
				t.Fatal(err)
			}
		}
		clk.Step(time.Second) // a name of its own for each rotated file
		// The container writes while the pass rotates its log.
		wrote := make(chan error, 1)
		go func() {
			var err error
			for range 3 {
				err = errors.Join(err, rt.burst())
			}
			wrote <- err
		}()
		if err := r.RotateLogs(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
	}

	files, _ := filepath.Glob(log + ".*")
	if len(files) != passes {
		t.Fatalf("%d rotated files, want one a pass, %d: %v", len(files), passes, files)
	}
	sort.Slice(files, func(i, j int) bool {
		return strings.TrimSuffix(files[i], ".gz") < strings.TrimSuffix(files[j], ".gz")
	})
	var all strings.Builder
	for _, name := range files {
		if strings.HasSuffix(name, ".gz") {
			all.WriteString(readGzip(t, name))
		} else {
			b, _ := os.ReadFile(name)
			all.Write(b)
		}
	}
	b, _ := os.ReadFile(log)
	all.Write(b)
	lines := strings.Split(strings.TrimSuffix(all.String(), "\n"), "\n")
	if len(lines) != rt.n {
		t.Fatalf("%d lines kept, %d written", len(lines), rt.n)
	}
	for i, l := range lines {
		if want := fmt.Sprintf("line %d", i); l != want {
			t.Fatalf("line %d is %q, want %q", i, l, want)
		}
	}
}

func TestNewLogRotatorRejectsNegativeWorkers(t *testing.T) {
	_, err := cri.NewLogRotator(cri.LogRotatorConfig{Runtime: newLogRuntime(), MaxWorkers: -1})
	if err == nil || !strings.Contains(err.Error(), "MaxWorkers") {
		t.Errorf("error %v, want one naming MaxWorkers", err)
	}
}

// TestLogRotatorRunListsIntoTheSameMemory: Run's listings reuse one
// buffer (and their IDs and set of IDs) from one period to the next, and
// still forget the log path of a container that stopped; RotateLogs,
// which may run beside Run, lists into memory of its own.
func TestLogRotatorRunListsIntoTheSameMemory(t *testing.T) {
	dir := t.TempDir()
	rt := &briefLogRuntime{logRuntime: newLogRuntime()}
	for _, id := range []string{"c1", "c2"} {
		rt.add(id, filepath.Join(dir, id+".log"), runtimeapi.ContainerState_CONTAINER_RUNNING)
		writeFile(t, filepath.Join(dir, id+".log"), "small")
	}
	clk := clocktesting.NewFakeClock(rotateStart)
	r := newRotator(t, rt, clk, 1<<20, 0)
	runRotator(t, r, clk)
	// period steps the clock by a period and waits until Run listed for
	// the nth time and the runtime was asked statuses times in all.
	period := func(step string, n, statuses int) {
		t.Helper()
		clk.Step(cri.DefaultLogRotatePeriod)
		waitFor(t, step, func() (bool, string) {
			rt.mu.Lock()
			lists, asked := len(rt.bufs), rt.statusCalls
			rt.mu.Unlock()
			seen := fmt.Sprintf("%d lists and %d statuses asked, want %d and %d", lists, asked, n, statuses)
			if lists > n || asked > statuses {
				t.Fatalf("%s: %s", step, seen)
			}
			return lists == n && asked == statuses, seen
		})
	}
	period("first period", 1, 2)
	rt.add("c2", filepath.Join(dir, "c2.log"), runtimeapi.ContainerState_CONTAINER_EXITED)
	rt.add("c3", filepath.Join(dir, "c3.log"), runtimeapi.ContainerState_CONTAINER_RUNNING)
	writeFile(t, filepath.Join(dir, "c3.log"), "small")
	period("c2 stopped, c3 started", 2, 3)
	rt.add("c2", filepath.Join(dir, "c2.log"), runtimeapi.ContainerState_CONTAINER_RUNNING)
	period("c2 running again: its path was forgotten", 3, 4)

	rt.mu.Lock()
	bufs := slices.Clone(rt.bufs)
	rt.mu.Unlock()
	for _, b := range bufs {
		if b == nil || b != bufs[0] {
			t.Fatalf("Run's listings were given buffers %v; want one, the same each time", bufs)
		}
	}
	if err := r.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	last := rt.bufs[len(rt.bufs)-1]
	rt.mu.Unlock()
	if last == bufs[0] {
		t.Error("RotateLogs listed into Run's buffer")
	}
}

// A log the runtime reports outside LogsDir, lexically or behind a
// symlink out of it, is neither rotated nor pruned: its check fails
// naming the container; a log within LogsDir is rotated as ever.
func TestLogRotatorLeavesLogsOutsideLogsDir(t *testing.T) {
	root := t.TempDir()
	logs, elsewhere := filepath.Join(root, "logs"), filepath.Join(root, "elsewhere")
	for _, d := range []string{filepath.Join(logs, "ns_good_uid", "c"), elsewhere} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(elsewhere, filepath.Join(logs, "ns_evil_uid")); err != nil {
		t.Fatal(err)
	}
	rt := newLogRuntime()
	paths := map[string]string{
		"good":    filepath.Join(logs, "ns_good_uid", "c", "0.log"),
		"outside": filepath.Join(elsewhere, "0.log"),
		"climbs":  filepath.Join(logs, "..", "elsewhere", "1.log"),
		"symlink": filepath.Join(logs, "ns_evil_uid", "2.log"),
	}
	for id, p := range paths {
		rt.add(id, p, runtimeapi.ContainerState_CONTAINER_RUNNING)
		writeFile(t, filepath.Clean(p), "big enough")
		writeFile(t, filepath.Clean(p)+".20200101-000000", "an old rotation")
	}
	var mu sync.Mutex
	var logged []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		logged = append(logged, args)
		mu.Unlock()
	}, funcr.Options{})
	r, err := cri.NewLogRotator(cri.LogRotatorConfig{Runtime: rt, MaxSize: 1, MaxFiles: 2, LogsDir: logs,
		Clock: clocktesting.NewFakeClock(rotateStart), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RotateLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(logged, "\n")
	for _, id := range []string{"outside", "climbs", "symlink"} {
		if want := "container " + id + ": not rotating a log outside the pod logs directory"; !strings.Contains(all, want) {
			t.Errorf("the log does not say %q:\n%s", want, all)
		}
	}
	if got, want := listDir(t, elsewhere), []string{"0.log", "0.log.20200101-000000", "1.log", "1.log.20200101-000000", "2.log", "2.log.20200101-000000"}; !slices.Equal(got, want) {
		t.Errorf("files outside LogsDir: %v, want them untouched: %v", got, want)
	}
	if got, want := listDir(t, filepath.Dir(paths["good"])), []string{"0.log", "0.log.20260304-050607"}; !slices.Equal(got, want) {
		t.Errorf("files of the log within LogsDir: %v, want %v", got, want)
	}
	if _, err := cri.NewLogRotator(cri.LogRotatorConfig{Runtime: rt, LogsDir: "logs"}); err == nil || !strings.Contains(err.Error(), "LogsDir") {
		t.Errorf("a relative LogsDir: %v, want an error naming it", err)
	}
}
