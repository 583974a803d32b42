package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
)

// oneNode runs one pod whose container "app" logs to a file; it is both
// the server's PodLister and its RuntimeReader.
type oneNode struct {
	pod    *v1.Pod
	status *runtime.PodStatus
}

func (n oneNode) Pods() []*v1.Pod { return []*v1.Pod{n.pod} }

func (n oneNode) GetPods(context.Context, bool) ([]*runtime.Pod, error) { return nil, nil }

func (n oneNode) GetPodStatus(context.Context, types.UID, string, string) (*runtime.PodStatus, error) {
	return n.status, nil
}

// A server over a node with one pod reads its container's CRI log,
// joining the partial entries, and answers 404 for a pod the node does
// not run.
func Example() {
	dir, _ := os.MkdirTemp("", "logs")
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "0.log")
	_ = os.WriteFile(logPath, []byte(
		"2026-01-02T03:04:05Z stdout F hello\n"+
			"2026-01-02T03:04:06Z stdout P wor\n"+
			"2026-01-02T03:04:06Z stdout F ld\n"), 0o644)

	node := oneNode{
		pod: &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app"}}},
		},
		status: &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{{
			ID: runtime.ContainerID{Type: "containerd", ID: "c1"}, Name: "app",
			State: runtime.ContainerStateRunning, LogPath: logPath,
		}}},
	}
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
