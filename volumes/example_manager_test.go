package volumes_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/volumes"
)

// A volume manager sets up a pod's emptyDir before its containers start
// and removes it once the pod is gone.
func ExampleManager() {
	podsDir, _ := os.MkdirTemp("", "pods")
	defer os.RemoveAll(podsDir)
	m, err := volumes.New(volumes.Config{PodsDir: podsDir})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "0f1e"},
		Spec: v1.PodSpec{
			Volumes:    []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			Containers: []v1.Container{{Name: "app", VolumeMounts: []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}}},
		},
	}
	m.AddPod(pod)
	if err := m.WaitForAttachAndMount(ctx, pod); err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := m.HostPath(pod, "cache")
	fmt.Println(strings.TrimPrefix(dir, podsDir))

	m.RemovePod(pod.UID)
	if err := m.WaitForUnmount(ctx, pod.UID); err != nil {
		fmt.Println(err)
		return
	}
	_, err = os.Stat(filepath.Join(podsDir, "0f1e", "volumes"))
	fmt.Println(os.IsNotExist(err))

	bad := pod.DeepCopy()
	bad.UID, bad.Name = "a2b3", "bad"
	bad.Spec.Containers[0].VolumeMounts[0].Name = "data"
	m.AddPod(bad)
	fmt.Println(m.WaitForAttachAndMount(ctx, bad))
	// Output:
	// /0f1e/volumes/kubernetes.io~empty-dir/cache
	// true
	// unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: pod default/bad: spec.containers[0].volumeMounts[0].name: the pod has no volume named "data" in spec.volumes
}
