package cri_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

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

func newRotator(t *testing.T, rt cri.LogRuntime, clk *clocktesting.FakeClock, maxSize int64, maxFiles int) *cri.LogRotator {
	t.Helper()
	r, err := cri.NewLogRotator(cri.LogRotatorConfig{Runtime: rt, MaxSize: maxSize, MaxFiles: maxFiles, Clock: clk})
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Run never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(cri.DefaultLogRotatePeriod - time.Second)
	if diff := cmp.Diff([]string{"0.log"}, listDir(t, dir)); diff != "" {
		t.Fatalf("before the period (-want +got):\n%s", diff)
	}
	clk.Step(time.Second)
	want := []string{"0.log", "0.log.20260304-050617"}
	for i := 0; ; i++ {
		got := listDir(t, dir)
		if cmp.Equal(want, got) {
			break
		}
		if time.Now().After(deadline) || i > 10000 {
			t.Fatalf("files after a period: %v, want %v", got, want)
		}
		time.Sleep(time.Millisecond)
	}
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
}

func (b *briefLogRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return nil, errors.New("the full list was asked of a runtime that lists in brief")
}

func (b *briefLogRuntime) ListContainersBrief(ctx context.Context, f *runtimeapi.ContainerFilter, _ criclient.ListKeys) ([]criclient.BriefContainer, error) {
	b.briefCalls++
	cs, err := b.logRuntime.ListContainers(ctx, f)
	var out []criclient.BriefContainer
	for _, c := range cs {
		out = append(out, criclient.BriefContainer{ID: c.Id, State: c.State})
	}
	return out, err
}

func (b *briefLogRuntime) ListPodSandboxBrief(context.Context, *runtimeapi.PodSandboxFilter, criclient.ListKeys) ([]criclient.BriefSandbox, error) {
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
