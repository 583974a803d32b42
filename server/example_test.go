package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
)

// A server over a node with one pod reads its container's CRI log,
// joining the partial entries.
func Example() {
	dir, _ := os.MkdirTemp("", "logs")
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "0.log")
	_ = os.WriteFile(logPath, []byte(
		"2026-01-02T03:04:05Z stdout F hello\n"+
			"2026-01-02T03:04:06Z stdout P wor\n"+
			"2026-01-02T03:04:06Z stdout F ld\n"), 0o644)

	node := newFakeNode()
	node.addPod("default", "web", "uid-1", &runtime.ContainerStatus{
		ID: runtime.ContainerID{Type: "containerd", ID: "c1"}, Name: "app",
		State: runtime.ContainerStateRunning, LogPath: logPath,
	})
	srv, err := server.New(server.Config{NodeName: "node-1", Pods: node, Runtime: node})
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	for _, path := range []string{"/containerLogs/default/web/app?timestamps=true", "/containerLogs/default/nope/app"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s", resp.StatusCode, body)
	}
	// Output:
	// 200 2026-01-02T03:04:05Z hello
	// 2026-01-02T03:04:06Z world
	// 404 pod "nope" does not exist
}
