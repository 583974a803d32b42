package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
)

// limitsAgent runs an agent on the e2e containerd with the pods of src
// and returns it; eviction, when set, turns on its eviction manager, and
// edits change its CRI config. The agent is stopped and the node's pods
// removed when the test ends.
func limitsAgent(t *testing.T, node string, src podsource.Source, ev *agent.EvictionConfig, edits ...func(*cri.Config)) *agent.Agent {
	t.Helper()
	client, _ := dialContainerd(t)
	dir := t.TempDir()
	podsDir := filepath.Join(dir, "pods")
	criCfg := cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: podsDir, ResolvConf: "-"}
	for _, e := range edits {
		e(&criCfg)
	}
	a, err := agent.New(agent.Config{
		NodeName: node, NodeIPs: []string{"127.0.0.1"}, RuntimeService: client, ImageService: client,
		Sources: []podsource.Source{src}, HousekeepingPeriod: 500 * time.Millisecond, Eviction: ev,
		CRI: criCfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		removePodsOf(t, client, node)
		unmountUnder(podsDir)
	})
	return a
}

// waitPod polls the agent's pods every 200ms, for at most limit, until
// cond holds on the pod of that name; it fails with the last status seen.
func waitPod(t *testing.T, a *agent.Agent, name, what string, limit time.Duration, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last *v1.Pod
	for {
		for _, p := range a.Pods() {
			if p.Name == name {
				last = p
				if cond(p) {
					return p
				}
			}
		}
		if time.Now().After(deadline) {
			if last == nil {
				t.Fatalf("%s: no pod %s within %v", what, name, limit)
			}
			t.Fatalf("%s: not within %v; last status of %s: phase %s reason %q message %q containers %+v",
				what, limit, name, last.Status.Phase, last.Status.Reason, last.Status.Message, last.Status.ContainerStatuses)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestOOMKilledOnContainerd runs a container limited to 20Mi of memory
// that allocates without end (tail buffers /dev/zero, which has no
// newline): the kernel kills it in its memory cgroup, and the pod ends
// Failed with the container terminated, reason OOMKilled, exit code 137,
// as the kubelet reports it.
func TestOOMKilledOnContainerd(t *testing.T) {
	image := env(t, "NODEKIT_E2E_IMAGE")
	node := "e2e-oom"
	doc := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: oom}
spec:
  hostNetwork: true
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: hog
    image: %s
    command: ["tail", "/dev/zero"]
    resources: {limits: {memory: 20Mi}}
`, image)
	manifests := t.TempDir()
	if err := os.WriteFile(filepath.Join(manifests, "oom.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: node, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := limitsAgent(t, node, src, nil)
	p := waitPod(t, a, "oom-"+node, "hog terminated", 90*time.Second, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Fatalf("hog terminated with reason %q exit code %d (signal %d, message %q), want OOMKilled and 137: "+
			"the memory limit of 20Mi was not enforced by the kernel (check the memory controller under /sys/fs/cgroup and that runc applies limits)",
			term.Reason, term.ExitCode, term.Signal, term.Message)
	}
	p = waitPod(t, a, "oom-"+node, "oom Failed", 30*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "" {
		t.Errorf("pod reason %q, want none: the container failed, the agent did not", p.Status.Reason)
	}
}

// TestEmptyDirSizeLimitEvictionOnContainerd runs the agent with its
// eviction manager (no thresholds, a 1s period) and a pod from an API
// source (a static pod is critical, and never evicted, as in the
// kubelet) that writes 10Mi into a disk-backed emptyDir of sizeLimit
// 4Mi: the agent measures the volume, evicts the pod (Failed, reason
// Evicted, the kubelet's message naming the volume and its limit) and
// stops its container.
func TestEmptyDirSizeLimitEvictionOnContainerd(t *testing.T) {
	image := env(t, "NODEKIT_E2E_IMAGE")
	node := "e2e-sizelimit"
	api := podsource.NewChannel(podsource.SourceAPI, 4)
	a := limitsAgent(t, node, api, &agent.EvictionConfig{MonitoringInterval: time.Second, Thresholds: []eviction.Threshold{}})
	limit := resource.MustParse("4Mi")
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "filler-" + node, Namespace: "e2e", UID: types.UID(fmt.Sprintf("filler-%d", time.Now().UnixNano())),
			Annotations: map[string]string{podsource.AnnotationConfigSource: podsource.SourceAPI}},
		Spec: v1.PodSpec{
			NodeName: node, HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSDefault,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Volumes:                       []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &limit}}}},
			Containers: []v1.Container{{
				Name: "writer", Image: image, ImagePullPolicy: v1.PullIfNotPresent,
				Command:                []string{"sh", "-c", "dd if=/dev/zero of=/data/f bs=1M count=10; sleep 3600"},
				VolumeMounts:           []v1.VolumeMount{{Name: "scratch", MountPath: "/data"}},
				TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile,
			}},
		},
	}
	send := func(u podsource.Update) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := api.Send(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	send(podsource.Update{Op: podsource.SET})
	send(podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{pod}})
	p := waitPod(t, a, "filler-"+node, "filler evicted", 90*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	want := `Usage of EmptyDir volume "scratch" exceeds the limit "4Mi". `
	if p.Status.Reason != "Evicted" || p.Status.Message != want {
		t.Fatalf("filler: phase %s reason %q message %q, want Failed, Evicted and %q", p.Status.Phase, p.Status.Reason, p.Status.Message, want)
	}
	p = waitPod(t, a, "filler-"+node, "writer stopped", 30*time.Second, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	if c := p.Status.ContainerStatuses[0]; c.RestartCount != 0 {
		t.Errorf("writer: %d restarts, terminated %+v; want it stopped once, by the eviction", c.RestartCount, c.State.Terminated)
	}
}
