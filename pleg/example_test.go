package pleg_test

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// One relist sees a pod that was just started: its sandbox and its
// container started, and the cache holds its status.
func ExampleGeneric_Relist() {
	ctx := context.Background()
	fake, _ := fakecri.New(fakecri.Config{})
	logs, _ := os.MkdirTemp("", "pleg-example-")
	defer os.RemoveAll(logs)
	rt, _ := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: logs, PodsDir: logs})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "httpd", Image: "busybox:1.36"}}},
	}
	rt.SyncPod(ctx, pod, nil)

	cache := pleg.NewCache()
	gen, _ := pleg.NewGeneric(pleg.Config{Runtime: rt, Cache: cache})
	gen.Relist(ctx)
	for i := 0; i < 2; i++ {
		ev := <-gen.Watch()
		fmt.Println(ev.ID, ev.Type)
	}
	status, _ := cache.Get(pod.UID)
	fmt.Println(status.FindContainerStatus("httpd").State)
	// Output:
	// uid-web ContainerStarted
	// uid-web ContainerStarted
	// running
}
