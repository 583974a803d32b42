package agent_test

import (
	"context"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/status"
)

// reconciler is a status.Reconciler over the agent tests' history: its
// store differs from the agent's status while differ is set.
type reconciler struct {
	status.Sink
	mu     sync.Mutex
	differ bool
	pushes int
}

func (r *reconciler) UpdatePodStatus(ctx context.Context, pod *v1.Pod, s v1.PodStatus) error {
	r.mu.Lock()
	r.pushes++
	r.differ = false // the store now has it
	r.mu.Unlock()
	return r.Sink.UpdatePodStatus(ctx, pod, s)
}

func (r *reconciler) NeedsReconcile(*v1.Pod, v1.PodStatus) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.differ
}

func (r *reconciler) tamper() (pushes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.differ = true
	return r.pushes
}

func (r *reconciler) pushed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pushes
}

// As the kubelet's status manager: a pod whose status at its source
// differs from what the sink would write (another writer changed it) has
// its status written again, whether the source reports a status change
// (RECONCILE) or a change that also touched the spec (UPDATE), at most
// once per status.ReconcileInterval (TestManagerReconcilesAStatusChangedElsewhere).
func TestStatusAnotherWriterChangedIsWrittenAgain(t *testing.T) {
	r := &reconciler{}
	f, clk, _, step, _ := apiAgentOn(t, newFake(t), t.TempDir(), func(c *agent.Config) {
		r.Sink = c.StatusSink
		c.StatusSink = r
	})
	pod := apiPod("web", v1.RestartPolicyAlways, []string{"main"})
	f.send(podsource.ADD, pod)
	st := step("web", "running", phaseRunning)
	seen := pod.DeepCopy()
	seen.Status = st

	before := r.tamper()
	f.send(podsource.RECONCILE, seen)
	eventuallyShowing(t, "the status written again after a RECONCILE", func() bool { return r.pushed() > before },
		func() string { return "no push" })

	clk.Step(status.ReconcileInterval)
	before = r.tamper()
	updated := seen.DeepCopy()
	updated.Labels = map[string]string{"app": "web"}
	f.send(podsource.UPDATE, updated)
	eventuallyShowing(t, "the status written again after an UPDATE", func() bool { return r.pushed() > before },
		func() string { return "no push" })
}
