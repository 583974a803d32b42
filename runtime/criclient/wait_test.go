package criclient_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// TestDialWaitsForTheRuntime: a socket that is not there yet is waited
// for with a doubling back-off on the clock, each wait logged, until the
// runtime serves it.
func TestDialWaitsForTheRuntime(t *testing.T) {
	endpoint := "unix://" + filepath.Join(t.TempDir(), "fakecri.sock")
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var waits []string
	log := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, args)
	}, funcr.Options{})
	type result struct {
		c   *criclient.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := criclient.DialWait(context.Background(), endpoint, clk, log)
		done <- result{c, err}
	}()
	for _, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		deadline := time.Now().Add(10 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatalf("no wait of %s within 10s", d)
			}
			goruntime.Gosched()
		}
		clk.Step(d)
	}
	mu.Lock()
	got := strings.Join(waits, "\n")
	mu.Unlock()
	for _, want := range []string{`"retryIn"="100ms"`, `"retryIn"="200ms"`, `"retryIn"="400ms"`, `"endpoint"="` + endpoint + `"`} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %s:\n%s", want, got)
		}
	}

	rt, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := fakecri.ListenUnix(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- fakecri.NewServer(rt, rt).Serve(ctx, lis) }()
	defer func() { cancel(); <-served }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("DialWait: %v", r.err)
			}
			_ = r.c.Close(context.Background())
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("DialWait did not connect within 20s of the runtime's start")
		}
		if clk.HasWaiters() {
			clk.Step(5 * time.Second)
		}
		goruntime.Gosched()
	}
}

// TestDialWaitGivesUpOnWhatWaitingCannotMend: an endpoint that is no
// socket fails at once; a wait ended by its context names the endpoint.
func TestDialWaitGivesUpOnWhatWaitingCannotMend(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := criclient.DialWait(context.Background(), "unix://"+file, clk, funcr.New(func(string, string) {}, funcr.Options{})); err == nil {
		t.Error("a plain file was accepted as a runtime socket")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	missing := "unix://" + filepath.Join(t.TempDir(), "missing.sock")
	_, err := criclient.DialWait(ctx, missing, clk, funcr.New(func(string, string) {}, funcr.Options{}))
	if err == nil || !strings.Contains(err.Error(), missing) || errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "waiting for the runtime") {
		t.Errorf("DialWait with an ended context = %v, want an error naming %s", err, missing)
	}
}
