//go:build unix

package podsource_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodekit/nodekit/podsource"
)

// A named pipe in the manifest directory is refused with an event naming
// it, without being opened for a blocking read, and the other manifests
// are read; a symlink to a manifest is followed and one to a directory
// skipped, as by the kubelet.
func TestFileSourceSkipsWhatIsNotARegularFile(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	write(t, dir, "web.yaml", webYAML)
	write(t, elsewhere, "job.json", jobJSON)
	pipe := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "job.json"), filepath.Join(dir, "job.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	var ev events
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n", Events: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	out := run(t, src)
	t.Cleanup(func() {
		// Frees a source blocked in opening the pipe, so that a failure
		// ends the test instead of hanging it.
		if f, err := os.OpenFile(pipe, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	u := next(t, out)
	if got := strings.Join(names(u.Pods), ","); got != "batch/job-n,default/web-n" {
		t.Errorf("pods %s, want batch/job-n,default/web-n", got)
	}
	all := strings.Join(ev.all(), "\n")
	if want := pipe + ": not a regular file but a named pipe"; !strings.Contains(all, want) || strings.Count(all, "\n") != 0 {
		t.Errorf("events:\n%s\nwant one saying %q", all, want)
	}
}
