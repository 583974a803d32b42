package main

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// SIGHUP stops the server cleanly, as SIGTERM does: run returns nil and
// the socket is removed.
func TestSIGHUPStopsCleanly(t *testing.T) {
	if !slices.Contains(stopSignals(), os.Signal(syscall.SIGHUP)) {
		t.Fatalf("stopSignals() = %v: SIGHUP would kill the process", stopSignals())
	}
	ctx, stop := signalContext()
	defer stop()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	done := make(chan error, 1)
	go func() { done <- run(ctx, "unix://"+sock, nil, nil, "127.88.0.0/16") }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the socket did not appear within 20s")
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run() = %v after SIGHUP", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return within 20s of SIGHUP")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is left behind: %v", err)
	}
}
