package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
)

// checkpointConfig is resizeAgent's node (1 CPU, 1Gi) with its
// allocations kept in file.
func checkpointConfig(file string) func(*agent.Config) {
	return func(c *agent.Config) {
		c.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourcePods: resource.MustParse("10")}
		c.AllocationCheckpoint = file
	}
}

// checkpointedUIDs are the pods the allocation checkpoint holds.
func checkpointedUIDs(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Pods map[string]json.RawMessage `json:"pods"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("the checkpoint does not parse: %v\n%s", err, b)
	}
	var uids []string
	for uid := range f.Pods {
		uids = append(uids, uid)
	}
	return uids
}

// An agent that restarts admits its pods with what it had allocated to
// them, as the kubelet does from its allocation checkpoint: a pod whose
// resize was deferred (it does not fit beside another) keeps running
// with its old resources and its resize stays Deferred, instead of being
// admitted afresh with the resources its spec asks for, which do not fit
// and would have it rejected and stopped (a pod its source reports
// Succeeded comes along). Once the other pod goes, the resize is carried
// out; the checkpoint forgets the pods that went, also one that went while
// no agent ran.
func TestAllocationsSurviveARestart(t *testing.T) {
	fake := newFake(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "allocated_pods_state")

	f1, _, _, step1, stop1 := apiAgentOn(t, fake, dir, checkpointConfig(file))
	other := apiPod("other", v1.RestartPolicyAlways, []string{"main"})
	other.Spec.Containers[0].Resources = sized("600m", "128Mi")
	pod := apiPod("web", v1.RestartPolicyAlways, []string{"main"})
	pod.Spec.Containers[0].Resources = sized("200m", "128Mi")
	gone := apiPod("gone", v1.RestartPolicyAlways, []string{"main"})
	gone.Spec.Containers[0].Resources = sized("100m", "64Mi")
	f1.send(podsource.ADD, other, pod, gone)
	st := step1("web", "running", func(s v1.PodStatus) bool { return containerSized(s, "200m", "128Mi") })
	id := st.ContainerStatuses[0].ContainerID
	step1("other", "running", func(s v1.PodStatus) bool { return containerSized(s, "600m", "128Mi") })
	step1("gone", "running", phaseRunning)
	resized := pod.DeepCopy()
	resized.Status = st
	resized.Spec.Containers[0].Resources = sized("500m", "128Mi")
	f1.send(podsource.UPDATE, resized)
	step1("web", "deferred", func(s v1.PodStatus) bool { return condOf(s, v1.PodResizePending).Reason == v1.PodReasonDeferred })
	stop1()
	if got := checkpointedUIDs(t, file); len(got) != 3 {
		t.Fatalf("the checkpoint holds %v; want the 3 pods", got)
	}

	// The second agent gets the pods as the API server has them: web asks
	// for the 500m it was not given, gone is gone, done has finished.
	done := apiPod("done", v1.RestartPolicyNever, []string{"main"})
	done.Spec.Containers[0].Resources = sized("300m", "64Mi")
	done.Status.Phase = v1.PodSucceeded
	f2, _, events2, step2, _ := apiAgentOn(t, fake, dir, checkpointConfig(file))
	f2.send(podsource.ADD, other, resized, done)
	got := step2("web", "adopted, its resize still deferred", func(s v1.PodStatus) bool {
		return condOf(s, v1.PodResizePending).Reason == v1.PodReasonDeferred || s.Phase == v1.PodFailed
	})
	if got.Phase != v1.PodRunning || !containerSized(got, "200m", "128Mi") {
		t.Fatalf("web after the restart: phase %s reason %q %q, containers %+v; want Running with its allocated 200m",
			got.Phase, got.Reason, got.Message, got.ContainerStatuses)
	}
	if c := got.ContainerStatuses[0]; c.ContainerID != id || c.RestartCount != 0 {
		t.Errorf("container %s restarts %d after the restart; want %s kept", c.ContainerID, c.RestartCount, id)
	}
	for _, e := range events2.snapshot() {
		if strings.HasPrefix(e, "OutOf") {
			t.Errorf("event %q: a pod was refused", e)
		}
	}

	f2.send(podsource.REMOVE, other)
	step2("web", "resized once the other pod is gone", func(s v1.PodStatus) bool {
		return containerSized(s, "500m", "128Mi") && !resizing(s)
	})
	var got1 []string
	eventuallyShowing(t, "the checkpoint holds web alone", func() bool {
		step2("web", "resized", func(v1.PodStatus) bool { return true }) // a second on: housekeeping runs
		got1 = checkpointedUIDs(t, file)
		return len(got1) == 1 && got1[0] == string(pod.UID)
	}, func() string { return fmt.Sprint(got1) })
}

// A checkpoint that is not the agent's writing (a torn write, an edit)
// stops the agent before it runs any pod, with an error naming the
// file, as the kubelet refuses a corrupt allocation checkpoint.
func TestCorruptAllocationCheckpoint(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":       "{\"pods\": {",
		"wrong checksum": `{"pods":{"u":{"containers":{"c":{"requests":{"cpu":"1"}}}}},"checksum":"0000"}`,
		"data after it":  `{"pods":{},"checksum":"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"} {}`,
		"no pods":        `{"checksum":"x"}`,
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "allocated_pods_state")
			if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			fake := newFake(t)
			a, err := agent.New(agent.Config{NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{podsource.NewChannel("api", 1)}, AllocationCheckpoint: file})
			if err != nil {
				t.Fatal(err)
			}
			err = a.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("Run = %v; want an error naming %s as corrupt", err, file)
			}
			if n := len(fake.Calls()); n != 0 {
				t.Errorf("%d runtime calls before the refusal; want none", n)
			}
		})
	}
}
