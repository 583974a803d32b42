package cri_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// A running container's log past MaxSize is rotated: the old content
// moves to a timestamped file and the runtime reopens an empty log.
func ExampleLogRotator() {
	ctx := context.Background()
	fake, _ := fakecri.New(fakecri.Config{})
	logs, _ := os.MkdirTemp("", "cri-logrotate-example-")
	defer os.RemoveAll(logs)
	rt, _ := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: logs})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "httpd", Image: "busybox:1.36",
			Env: []v1.EnvVar{{Name: "FAKECRI_LOG", Value: "hello"}}}}},
	}
	status, _ := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	rt.SyncPod(ctx, pod, status)

	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	r, _ := cri.NewLogRotator(cri.LogRotatorConfig{Runtime: fake, MaxSize: 10, Clock: clk, LogsDir: logs})
	if err := r.RotateLogs(ctx); err != nil { // Run does this every 10 s
		fmt.Println(err)
	}
	files, _ := filepath.Glob(filepath.Join(logs, "*", "httpd", "*"))
	for _, f := range files {
		info, _ := os.Stat(f)
		fmt.Println(filepath.Base(f), info.Size() > 0)
	}
	// Output:
	// 0.log false
	// 0.log.20260304-050607 true
}
