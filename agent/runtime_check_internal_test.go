package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// hangingStatus is fakecri whose Status, once hang is set, answers only
// when its context ends, as a frozen runtime behind gRPC does.
// With deaf set instead, Status ignores its context and answers only
// when deaf is closed; with panics set, it panics. calls counts the calls.
type hangingStatus struct {
	*fakecri.Runtime
	mu     sync.Mutex
	hang   bool
	deaf   chan struct{}
	panics bool
	calls  int
}

func (h *hangingStatus) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	h.mu.Lock()
	hang, deaf, panics := h.hang, h.deaf, h.panics
	h.calls++
	h.mu.Unlock()
	if panics {
		panic("status exploded")
	}
	if deaf != nil {
		<-deaf
	}
	if hang {
		<-ctx.Done()
		return nil, grpcstatus.FromContextError(ctx.Err()).Err()
	}
	return h.Runtime.Status(ctx, verbose)
}

func (h *hangingStatus) setHang(hang bool) {
	h.mu.Lock()
	h.hang = hang
	h.mu.Unlock()
}

func (h *hangingStatus) callCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// logLines is a logger's output, safe for concurrent use.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// checkEnv is an agent over fakecri behind a hangingStatus, on a fake
// clock, logging to log.
type checkEnv struct {
	a   *Agent
	rs  *hangingStatus
	clk *clocktesting.FakeClock
	log *logLines
}

// newCheckEnv makes a checkEnv; edit, when not nil, sets the runtime up
// (hang, deaf, panics, fakecri's injected errors) before the agent exists.
func newCheckEnv(t *testing.T, edit func(*hangingStatus)) *checkEnv {
	t.Helper()
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := &checkEnv{rs: &hangingStatus{Runtime: fake}, clk: clocktesting.NewFakeClock(time.Now()), log: &logLines{}}
	if edit != nil {
		edit(e.rs)
	}
	dir := t.TempDir()
	e.a, err = New(Config{NodeName: "node", RuntimeService: e.rs, ImageService: fake,
		Sources: []podsource.Source{podsource.NewChannel("api", 0)},
		Clock:   e.clk, Logger: funcr.New(e.log.add, funcr.Options{}),
		CRI: cri.Config{PodLogsDir: dir + "/logs", PodsDir: dir + "/pods", ResolvConf: "-"}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// pollUntil polls cond every 5ms for up to 20s of wall time.
func pollUntil(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s\n%s", what, state())
		}
	}
}

// A runtime that does not answer Status within RuntimeStatusTimeout makes
// /healthz fail at once, naming the timeout, instead of after the CRI
// call's own 2-minute timeout.
func TestHealthzFailsWhenStatusDoesNotAnswerInTime(t *testing.T) {
	e := newCheckEnv(t, func(h *hangingStatus) { h.hang = true })
	a, clk, log := e.a, e.clk, e.log
	if a.cfg.RuntimeStatusTimeout != 5*time.Second {
		t.Errorf("default RuntimeStatusTimeout %s, want 5s", a.cfg.RuntimeStatusTimeout)
	}
	_, err2 := checkPastTimeout(t, a, clk, log)
	const want = "the runtime did not answer Status within 5s"
	if err2 == nil || !strings.Contains(err2.Error(), want) {
		t.Errorf("checkRuntime() = %v, want %q", err2, want)
	}
	if code, body := healthz(a); code != http.StatusInternalServerError || !strings.Contains(body, want) {
		t.Errorf("/healthz: %d %q, want 500 saying %q", code, body, want)
	}
}

// checkPastTimeout runs a.checkRuntime, steps clk past the Status timeout
// once the check waits on it, and returns the check's verdict.
func checkPastTimeout(t *testing.T, a *Agent, clk *clocktesting.FakeClock, log *logLines) (bool, error) {
	t.Helper()
	type res struct {
		ok  bool
		err error
	}
	done := make(chan res, 1)
	go func() { ok, err := a.checkRuntime(context.Background()); done <- res{ok, err} }()
	pollUntil(t, "the check waits on the clock", clk.HasWaiters, log.String)
	clk.Step(a.cfg.RuntimeStatusTimeout)
	select {
	case r := <-done:
		return r.ok, r.err
	case <-time.After(20 * time.Second):
		t.Fatal("the check did not return 20s after its timeout")
		return false, nil
	}
}

// A call cut off at the timeout answers the cancellation, not the
// runtime's state: the next check asks again, and a runtime that answers
// by then is healthy at once.
func TestCheckAfterATimeoutAsksAgain(t *testing.T) {
	e := newCheckEnv(t, func(h *hangingStatus) { h.hang = true })
	a, rs, clk, log := e.a, e.rs, e.clk, e.log
	if _, err := checkPastTimeout(t, a, clk, log); err == nil {
		t.Fatal("a check of a hung runtime succeeded")
	}
	rs.setHang(false)
	// The cut-off call returns once it sees its cancellation.
	pollUntil(t, "the cut-off call returned", func() bool { return len(a.rtCall.done) == 1 }, log.String)
	if ok, err := a.checkRuntime(context.Background()); !ok || err != nil {
		t.Errorf("checkRuntime() of a runtime that answers again = %v, %v; want true, nil", ok, err)
	}
	if a.Healthy() != nil {
		t.Errorf("Healthy() = %v, want nil", a.Healthy())
	}
}

// A runtime whose Status ignores cancellation does not hold up the
// check, and holds one call: the checks after the timeout wait on that
// same call instead of starting more, and take its answer when it comes.
func TestStatusThatIgnoresCancellationHoldsOneCall(t *testing.T) {
	deaf := make(chan struct{})
	e := newCheckEnv(t, func(h *hangingStatus) { h.deaf = deaf })
	a, rs, clk, log := e.a, e.rs, e.clk, e.log
	for i := range 3 {
		if ok, err := checkPastTimeout(t, a, clk, log); ok || err == nil || !strings.Contains(err.Error(), "did not answer Status within 5s") {
			t.Fatalf("check %d: checkRuntime() = %v, %v; want the timeout", i, ok, err)
		}
	}
	if calls := rs.callCount(); calls != 1 {
		t.Errorf("%d Status calls after three checks of a runtime that never answered, want 1", calls)
	}
	close(deaf)
	ok, err := a.checkRuntime(context.Background())
	if !ok || err != nil {
		t.Errorf("after the runtime answered: checkRuntime() = %v, %v; want true, nil", ok, err)
	}
	if a.rtCall != nil {
		t.Error("the answered call is still kept")
	}
}

// A runtime whose Status panics fails the check with the panic, logged
// with its stack, and the agent goes on.
func TestStatusPanicIsTheChecksError(t *testing.T) {
	e := newCheckEnv(t, func(h *hangingStatus) { h.panics = true })
	a, log := e.a, e.log
	ok, err := a.checkRuntime(context.Background())
	const want = "the runtime's Status panicked: status exploded"
	if ok || err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("checkRuntime() = %v, %v; want false and %q", ok, err, want)
	}
	if log.count("recovered a panic") != 1 || log.count("runtime_check.go") == 0 {
		t.Errorf("the panic is not logged with its stack:\n%s", log.String())
	}
	if code, body := healthz(a); code != http.StatusInternalServerError || !strings.Contains(body, want) {
		t.Errorf("/healthz: %d %q, want 500 saying %q", code, body, want)
	}
}

// Started before its runtime answers, the agent waits for it with
// back-off on the clock, logging why, and syncs nothing meanwhile; then it
// starts.
func TestRunWaitsForTheRuntime(t *testing.T) {
	e := newCheckEnv(t, func(h *hangingStatus) {
		for range 3 {
			h.InjectError("Status", grpcstatus.Error(codes.Unavailable, "connection refused"))
		}
	})
	a, fake, clk, log := e.a, e.rs.Runtime, e.clk, e.log
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	}()
	for i, delay := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		pollUntil(t, "the agent waits on the clock", func() bool {
			return log.count(`"msg"="waiting for the runtime"`) == i+1 && log.count("connection refused") == i+1 && clk.HasWaiters()
		}, log.String)
		if !strings.Contains(log.String(), `"retryIn"="`+delay.String()+`"`) {
			t.Errorf("wait %d: no back-off of %s logged:\n%s", i+1, delay, log.String())
		}
		if err := a.Healthy(); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("Healthy() = %v while the runtime is down", err)
		}
		for _, c := range fake.Calls() {
			if c != "Status" {
				t.Fatalf("%s called while waiting for the runtime: %v", c, fake.Calls())
			}
		}
		clk.Step(delay)
	}
	pollUntil(t, "the PLEG lists the runtime", func() bool {
		return countOf(fake.Calls(), "ListPodSandbox") > 0
	}, func() string { return strings.Join(fake.Calls(), " ") })
	if got := log.count("waiting for the runtime"); got != 3 {
		t.Errorf("%d waits logged, want 3", got)
	}
}

func countOf(calls []string, method string) int {
	n := 0
	for _, c := range calls {
		if c == method {
			n++
		}
	}
	return n
}

// healthz returns /healthz's status code and body.
func healthz(a *Agent) (int, string) {
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code, rec.Body.String()
}

// /healthz fails until the runtime has answered Status once, as the
// kubelet's node is not ready before its first runtime check.
func TestHealthzFailsUntilTheRuntimeAnswers(t *testing.T) {
	a := newCheckEnv(t, nil).a
	const want = "the runtime has not answered Status yet"
	if err := a.Healthy(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Healthy() before any check = %v, want %q", err, want)
	}
	if code, body := healthz(a); code != http.StatusInternalServerError || !strings.Contains(body, want) {
		t.Errorf("/healthz before any check: %d %q, want 500 saying %q", code, body, want)
	}
	if ok, err := a.checkRuntime(context.Background()); !ok || err != nil {
		t.Fatalf("checkRuntime() = %v, %v; want true, nil", ok, err)
	}
	if err := a.Healthy(); err != nil {
		t.Errorf("Healthy() once the runtime answered = %v, want nil", err)
	}
	if code, body := healthz(a); code != http.StatusOK {
		t.Errorf("/healthz once the runtime answered: %d %q, want 200", code, body)
	}
}

// A runtime that hangs just after a check fails /healthz within 10s: the
// next check comes 5s later, the kubelet's period, and its call fails
// /healthz once it has waited the 5s timeout.
func TestHungRuntimeFailsHealthzWithinPeriodAndTimeout(t *testing.T) {
	e := newCheckEnv(t, nil)
	a, rs, clk, log := e.a, e.rs, e.clk, e.log
	if ok, err := a.checkRuntime(context.Background()); !ok || err != nil {
		t.Fatalf("checkRuntime() = %v, %v; want true, nil", ok, err)
	}
	rs.setHang(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.watchRuntime(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("watchRuntime did not return 20s after its context ended")
		}
	}()
	pollUntil(t, "the checks wait on the clock", clk.HasWaiters, log.String)
	clk.Step(5 * time.Second)
	pollUntil(t, "a check calls Status 5s after the last", func() bool { return rs.callCount() == 2 }, func() string {
		return fmt.Sprintf("%d Status calls\n%s", rs.callCount(), log.String())
	})
	clk.Step(5 * time.Second)
	const want = "the runtime did not answer Status within 5s"
	if err := a.Healthy(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Healthy() 10s after the runtime hung = %v, want %q", err, want)
	}
	if code, body := healthz(a); code != http.StatusInternalServerError || !strings.Contains(body, want) {
		t.Errorf("/healthz 10s after the runtime hung: %d %q, want 500 saying %q", code, body, want)
	}
}

// A Status call that has waited past the timeout fails /healthz whether
// or not a check waits on it, saying how long it has waited: here a
// call that ignored its cut-off, 20s after the check that cut it off.
func TestHealthzSaysHowLongTheStatusCallHasWaited(t *testing.T) {
	deaf := make(chan struct{})
	defer close(deaf)
	e := newCheckEnv(t, func(h *hangingStatus) { h.deaf = deaf })
	a, clk, log := e.a, e.clk, e.log
	if _, err := checkPastTimeout(t, a, clk, log); err == nil {
		t.Fatal("a check of a hung runtime succeeded")
	}
	clk.Step(20 * time.Second)
	const want = "the runtime did not answer Status within 5s: its call has been waiting for 25s"
	if err := a.Healthy(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Healthy() = %v, want %q", err, want)
	}
}
