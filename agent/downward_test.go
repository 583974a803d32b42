package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
)

// containerID returns the ID of the pod's container, as fakecri knows it.
func (va *volumeAgent) containerID(pod *v1.Pod, container string) string {
	va.t.Helper()
	cs, err := va.fake.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(pod.UID)}})
	if err != nil {
		va.t.Fatal(err)
	}
	for _, c := range cs {
		if c.GetMetadata().GetName() == container {
			return c.GetId()
		}
	}
	va.t.Fatalf("pod %s has no container %s", pod.Name, container)
	return ""
}

func TestDownwardAPILimitsDefaultToTheNodesAllocatable(t *testing.T) {
	// Config.Allocatable reaches both the env and the downwardAPI volume:
	// a container without limits sees the node's allocatable cpu and
	// memory, as with the kubelet.
	va := startVolumeAgentWith(t, nil, func(c *agent.Config) {
		c.Allocatable = v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("3500m"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110"),
		}
	})
	va.send(podsource.SET)
	pod := apiPod("dapi", v1.RestartPolicyAlways, []string{"main"})
	field := func(res string) *v1.EnvVarSource {
		return &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: res}}
	}
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env,
		v1.EnvVar{Name: "CPU_LIMIT", ValueFrom: field("limits.cpu")},
		v1.EnvVar{Name: "MEMORY_LIMIT", ValueFrom: field("limits.memory")},
	)
	pod.Spec.Volumes = []v1.Volume{{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
		{Path: "cpu_limit", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
		{Path: "memory_limit", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.memory"}},
	}}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "podinfo", MountPath: "/etc/podinfo"}}
	va.send(podsource.ADD, pod)
	// The downwardAPI volume is a tmpfs where the agent may mount: the
	// pod goes before the agent stops, so it is unmounted.
	t.Cleanup(func() {
		va.delete(pod)
		eventually(t, "the pod's volume directory is removed", func() bool {
			_, err := os.Stat(filepath.Join(va.podsDir, string(pod.UID), "volumes"))
			return os.IsNotExist(err)
		})
	})
	va.waitFor("dapi", "runs", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })

	out, _, err := va.fake.ExecSync(context.Background(), va.containerID(pod, "main"), []string{"env"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CPU_LIMIT=4\n", "MEMORY_LIMIT=8589934592\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the container's env lacks %q:\n%s", want, out)
		}
	}
	dir := filepath.Join(va.podsDir, string(pod.UID), "volumes", "kubernetes.io~downward-api", "podinfo")
	for file, want := range map[string]string{"cpu_limit": "3500", "memory_limit": "8589934592"} {
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q (%v), want %q", file, got, err, want)
		}
	}
}
