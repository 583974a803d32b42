package criclient_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// restartingListener stands for a runtime that restarts. While up it hands
// its connections to the server. Taken down, it closes the connections
// it handed over, then closes every new one at once and records when it
// came, until the first that comes at or after downUntil: that one is
// closed too, and the listener is up again from then on.
type restartingListener struct {
	net.Listener
	mu        sync.Mutex
	up        bool
	conns     []net.Conn  // handed to the server
	downUntil time.Time   // when down: the end of the outage
	refused   []time.Time // the connections closed while down
}

func (l *restartingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.up {
			l.conns = append(l.conns, c)
			l.mu.Unlock()
			return c, nil
		}
		now := time.Now()
		l.refused = append(l.refused, now)
		l.up = !now.Before(l.downUntil)
		l.mu.Unlock()
		c.Close()
	}
}

// goDown takes the runtime down until the first connection at or after
// until.
func (l *restartingListener) goDown(until time.Time) {
	l.mu.Lock()
	l.up, l.downUntil = false, until
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// backUp returns when the runtime came back up (zero while it is down)
// and the times of the connections refused meanwhile.
func (l *restartingListener) backUp() (time.Time, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	refused := append([]time.Time(nil), l.refused...)
	if !l.up || len(refused) == 0 {
		return time.Time{}, refused
	}
	return refused[len(refused)-1], refused
}

// After a runtime has been down for 12 s, the client is back within 6 s
// of the runtime's return: its reconnection back-off is the kubelet's,
// whose waits grow to 3 s (3.6 s at most with their jitter). gRPC's
// default back-off would wait 8.4 s or more by then: its attempts come
// after 1 s, then 1.6 s, 2.56 s, 4.1 s and 6.55 s more, each within
// ±20%, so the first at or after 12 s is its sixth or later, and the
// wait after the sixth is 10.5 s less 20% at the least.
func TestClientReconnectsWithinTheKubeletsBackOff(t *testing.T) {
	var l *restartingListener
	_, c := serveFakeOn(t, fakecri.Config{}, func(inner net.Listener) net.Listener {
		l = &restartingListener{Listener: inner, up: true}
		return l
	})

	const outage = 12 * time.Second
	wentDown := time.Now()
	l.goDown(wentDown.Add(outage))
	// Calls made while the runtime is down fail as unavailable; the first
	// to succeed shows the client has reconnected.
	deadline := wentDown.Add(outage + 25*time.Second)
	var answered time.Time
	var lastErr error
	for calls := 0; answered.IsZero(); calls++ {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Version(cctx, "v1")
		ccancel()
		up, refused := l.backUp()
		switch {
		case err == nil && up.IsZero():
			t.Fatalf("Version answered while the runtime was down (%d connections refused)", len(refused))
		case err == nil:
			answered = time.Now()
		case up.IsZero() && !errors.Is(err, runtime.ErrUnavailable):
			t.Fatalf("Version while the runtime is down = %v, want runtime.ErrUnavailable", err)
		case time.Now().After(deadline) || calls > 10000:
			t.Fatalf("no answer %s after the runtime went down, %d calls; last error %v; %s",
				time.Since(wentDown).Round(time.Millisecond), calls, lastErr, attempts(wentDown, up, refused))
		default:
			lastErr = err
			time.Sleep(20 * time.Millisecond)
		}
	}
	up, refused := l.backUp()
	t.Logf("answered %s after going down; %s", answered.Sub(wentDown).Round(time.Millisecond), attempts(wentDown, up, refused))
	if len(refused) < 8 {
		t.Errorf("%d connections refused in %s, want the client to have tried at least 8 times: %s",
			len(refused), outage, attempts(wentDown, up, refused))
	}
	if took := answered.Sub(up); took > 6*time.Second {
		t.Errorf("the client answered %s after the runtime came back, want at most 6s: %s",
			took.Round(time.Millisecond), attempts(wentDown, up, refused))
	}
}

// attempts describes the connections refused and the return of the
// runtime, in time since it went down.
func attempts(wentDown, up time.Time, refused []time.Time) string {
	var b strings.Builder
	b.WriteString("connections refused at")
	for _, r := range refused {
		fmt.Fprintf(&b, " %s", r.Sub(wentDown).Round(time.Millisecond))
	}
	if !up.IsZero() {
		fmt.Fprintf(&b, "; back up at %s", up.Sub(wentDown).Round(time.Millisecond))
	}
	return b.String()
}
