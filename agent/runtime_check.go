package agent

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// Back-off of the start-up wait for the runtime: the kubelet's back-off
// while its runtime is down.
const (
	runtimeWaitInitial = 100 * time.Millisecond
	runtimeWaitMax     = 5 * time.Second
	// runtimeCheckPeriod is how often the runtime's Status is asked for
	// /healthz once the agent runs: the kubelet's period. A runtime that
	// hangs just after a check fails /healthz within this period and
	// Config.RuntimeStatusTimeout.
	runtimeCheckPeriod = 5 * time.Second
)

// waitForRuntime blocks until the runtime answers a Status call (ready or
// not: the verdict goes to /healthz), retrying with back-off on the clock
// and logging what it waits for. It returns false if ctx ends first.
func (a *Agent) waitForRuntime(ctx context.Context) bool {
	delay := runtimeWaitInitial
	for {
		answered, err := a.checkRuntime(ctx)
		if answered {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		a.log.Info("waiting for the runtime", "err", err.Error(), "retryIn", delay.String())
		t := a.cfg.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
		delay = min(2*delay, runtimeWaitMax)
	}
}

// watchRuntime checks the runtime every runtimeCheckPeriod until ctx
// ends.
func (a *Agent) watchRuntime(ctx context.Context) error {
	t := a.cfg.Clock.NewTicker(runtimeCheckPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			_, _ = a.checkRuntime(ctx)
		}
	}
}

// statusCall is a runtime Status call in flight: its verdict arrives on
// done (buffered), and cancel cancels it. cutOff marks a call cancelled
// at a timeout, whose verdict is then the cancellation's, not the
// runtime's.
type statusCall struct {
	done   chan statusResult
	cancel context.CancelFunc
	cutOff bool
}

type statusResult struct {
	answered bool
	err      error
}

// checkRuntime asks the runtime for its status and records the verdict
// for Healthy: nil, the call's error, the runtime's own not-ready reason,
// or, when the call has not answered within Config.RuntimeStatusTimeout
// on the clock, an error naming that timeout; the call is then cancelled
// and checkRuntime returns at once. A runtime that does not give up when
// cancelled keeps its call: the next check waits on that same call rather
// than start another, so a hung runtime holds one goroutine, not one per
// check, and never holds up the agent; once that call returns, its
// verdict (the cancellation) is dropped and the runtime asked again. A
// panic in Status is the call's
// error. answered reports whether the call itself succeeded. Calls are
// made one after the other (waitForRuntime, then watchRuntime), so
// a.rtCall needs no lock.
func (a *Agent) checkRuntime(ctx context.Context) (answered bool, err error) {
	if a.rtCall == nil {
		a.rtCall = a.startStatusCall(ctx)
	}
	t := a.cfg.Clock.NewTimer(a.cfg.RuntimeStatusTimeout)
	defer t.Stop()
	var r statusResult
	for waiting := true; waiting; {
		select {
		case r = <-a.rtCall.done:
			cutOff := a.rtCall.cutOff
			a.rtCall.cancel()
			a.rtCall = nil
			if waiting = cutOff; waiting {
				a.rtCall = a.startStatusCall(ctx)
			}
		case <-t.C():
			a.rtCall.cancel()
			a.rtCall.cutOff = true
			r = statusResult{err: fmt.Errorf("agent: the runtime did not answer Status within %s", a.cfg.RuntimeStatusTimeout)}
			waiting = false
		case <-ctx.Done():
			a.rtCall.cancel()
			a.rtCall.cutOff = true
			return false, ctx.Err()
		}
	}
	a.setRuntimeErr(r.err)
	return r.answered, r.err
}

// startStatusCall asks the runtime for its status on a goroutine of its
// own, under a context derived from ctx. The call's start on the clock is
// kept in a.rtSince, for Healthy, until the call returns; the goroutine
// clears it before it hands over the verdict, so that it never clears
// the start of the call after it.
func (a *Agent) startStatusCall(ctx context.Context) *statusCall {
	cctx, cancel := context.WithCancel(ctx)
	c := &statusCall{done: make(chan statusResult, 1), cancel: cancel}
	now := a.cfg.Clock.Now()
	a.mu.Lock()
	a.rtSince = now
	a.mu.Unlock()
	go func() {
		r := a.callStatus(cctx)
		a.mu.Lock()
		a.rtSince = time.Time{}
		a.mu.Unlock()
		c.done <- r
	}()
	return c
}

// callStatus makes one Status call; a panic in it is its error.
func (a *Agent) callStatus(ctx context.Context) (r statusResult) {
	defer func() {
		if v := recover(); v != nil {
			err := fmt.Errorf("agent: the runtime's Status panicked: %v", v)
			a.log.Error(err, "recovered a panic", "stack", string(debug.Stack()))
			r = statusResult{false, err}
		}
	}()
	st, err := a.rt.Status(ctx)
	if err != nil {
		return statusResult{false, err}
	}
	return statusResult{true, st.Ready()}
}

func (a *Agent) setRuntimeErr(err error) {
	a.mu.Lock()
	a.rtErr = err
	a.mu.Unlock()
}

// runtimeHealth is the runtime's part of Healthy: the last verdict, or,
// while a Status call has been waiting for Config.RuntimeStatusTimeout
// or longer on the clock, an error naming the timeout and the wait,
// whether or not a check has cut the call off yet.
func (a *Agent) runtimeHealth() error {
	a.mu.Lock()
	err, since := a.rtErr, a.rtSince
	a.mu.Unlock()
	if since.IsZero() {
		return err
	}
	if waited := a.cfg.Clock.Since(since); waited >= a.cfg.RuntimeStatusTimeout {
		return fmt.Errorf("agent: the runtime did not answer Status within %s: its call has been waiting for %s", a.cfg.RuntimeStatusTimeout, waited)
	}
	return err
}
