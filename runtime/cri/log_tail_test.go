package cri_test

import (
	"os"
	goruntime "runtime"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// TestFallbackToLogsReadsTheTailOnly gives a failed container a 16 MiB
// log and checks that a status reads its end, not the whole file.
func TestFallbackToLogsReadsTheTailOnly(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyNever, nil, "app")
	pod.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	withEnv(&pod.Spec.Containers[0], fakecri.EnvExitCode, "3")
	h.sync(pod)
	c := h.status(pod).FindContainerStatus("app")
	if c == nil || c.State != runtime.ContainerStateExited {
		t.Fatalf("container %+v, want exited", c)
	}

	line := func(tag, s string) string { return "2026-01-01T00:00:00.000000000Z stderr " + tag + " " + s + "\n" }
	var b strings.Builder
	b.WriteString(line("F", "MARKER only at the start"))
	filler := line("F", strings.Repeat("x", 200))
	for b.Len() < 16<<20 {
		b.WriteString(filler)
	}
	b.WriteString(line("P", "fatal: "))
	b.WriteString(line("F", "out of cheese"))
	if err := os.WriteFile(c.LogPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	st := h.status(pod)
	goruntime.ReadMemStats(&after)
	msg := st.FindContainerStatus("app").Message
	if !strings.HasSuffix(msg, "fatal: out of cheese\n") || strings.Contains(msg, "MARKER") {
		t.Errorf("message ends %q, want the log's last line, joined", msg[max(0, len(msg)-60):])
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("a status allocated %d bytes for a %d-byte log, want well under 1 MiB", n, b.Len())
	}
}
