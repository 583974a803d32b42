package agent

import (
	"context"
	"fmt"
	"time"
)

// Back-off of the start-up wait for the runtime: the kubelet's back-off
// while its runtime is down.
const (
	runtimeWaitInitial = 100 * time.Millisecond
	runtimeWaitMax     = 5 * time.Second
	// runtimeCheckPeriod is how often the runtime's Status is asked for
	// /healthz once the agent runs.
	runtimeCheckPeriod = 10 * time.Second
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

// watchRuntime checks the runtime every 10s until ctx ends.
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

// checkRuntime asks the runtime for its status and records the verdict
// for Healthy: nil, the call's error, the runtime's own not-ready reason,
// or, when the call has not answered within Config.RuntimeStatusTimeout
// on the clock, an error naming that timeout; the call is then cancelled,
// and checkRuntime returns once it has given up. answered reports whether
// the call itself succeeded.
func (a *Agent) checkRuntime(ctx context.Context) (answered bool, err error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		answered bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		st, err := a.rt.Status(cctx)
		if err != nil {
			done <- result{false, err}
			return
		}
		done <- result{true, st.Ready()}
	}()
	t := a.cfg.Clock.NewTimer(a.cfg.RuntimeStatusTimeout)
	var r result
	select {
	case r = <-done:
		t.Stop()
	case <-t.C():
		r.err = fmt.Errorf("agent: the runtime did not answer Status within %s", a.cfg.RuntimeStatusTimeout)
		a.setRuntimeErr(r.err) // seen at once, while the call gives up
		cancel()
		<-done
	}
	a.setRuntimeErr(r.err)
	return r.answered, r.err
}

func (a *Agent) setRuntimeErr(err error) {
	a.mu.Lock()
	a.rtErr = err
	a.mu.Unlock()
}
