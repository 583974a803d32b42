package images_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime/cri/images"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// Ensuring images over the in-memory runtime: a present image is used as
// it is, an absent one is pulled, and a pull that failed is not tried
// again until its back-off ends.
func Example() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	fake, _ := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}, Registry: []string{"nodekit.test/app:1"}})
	m, _ := images.New(images.Config{
		Service: fake,
		Clock:   clk,
		Events: func(_ *v1.Pod, typ, reason, _ string) {
			fmt.Printf("  event %s %s\n", typ, reason)
		},
	})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{Containers: []v1.Container{
			{Name: "present", Image: "busybox:1.36"},
			{Name: "pulled", Image: "nodekit.test/app:1"},
			{Name: "missing", Image: "nodekit.test/gone:1"},
		}},
	}
	sandbox := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)}}
	ensure := func(i int) {
		c := &pod.Spec.Containers[i]
		img, reason, err := m.EnsureImage(ctx, pod, c, "spec.containers["+c.Name+"]", sandbox)
		fmt.Printf("%s: present %v, reason %q, failed %v\n", c.Name, img != nil, reason, err != nil)
	}
	ensure(0)
	ensure(1)
	ensure(2)
	clk.Step(5e9) // 5 s: within the first 10 s back-off
	ensure(2)
	// Output:
	// present: present true, reason "", failed false
	//   event Normal Pulling
	//   event Normal Pulled
	// pulled: present true, reason "", failed false
	//   event Normal Pulling
	//   event Warning Failed
	// missing: present false, reason "ErrImagePull", failed true
	//   event Normal BackOff
	// missing: present false, reason "ImagePullBackOff", failed true
}
