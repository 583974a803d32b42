package server_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
)

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

// BenchmarkContainerLogs reads an 8 MiB CRI log of 100-byte lines, whole
// and with timestamps.
func BenchmarkContainerLogs(b *testing.B) {
	line := criLine(0, "stdout", "F", strings.Repeat("x", 100-len(criLine(0, "stdout", "F", ""))))
	content := strings.Repeat(line, (8<<20)/len(line))
	path := filepath.Join(b.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
	node := newFakeNode()
	node.addPod("ns", "web", "uid-1", &runtime.ContainerStatus{ID: runtime.ContainerID{ID: "c"}, Name: "app", State: runtime.ContainerStateRunning, LogPath: path})
	srv, err := server.New(server.Config{Pods: node, Runtime: node})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	for _, q := range []string{"", "?timestamps=true"} {
		b.Run("query="+q, func(b *testing.B) {
			b.SetBytes(int64(len(content)))
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(&discardWriter{h: http.Header{}}, httptest.NewRequest(http.MethodGet, "/containerLogs/ns/web/app"+q, nil))
			}
		})
	}
}
