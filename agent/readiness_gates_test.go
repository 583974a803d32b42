package agent_test

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podsource"
)

// As the upstream spec "Pods should support pod readiness gates": Ready
// follows a readiness gate's condition, which others set in the pod's
// status at its source; a status-only change there (RECONCILE) makes the
// agent sync the pod again within seconds (the spec allows 10), not at
// its next periodic resync, a minute after the last.
func TestReadinessGateFollowsTheSourcesCondition(t *testing.T) {
	f, clk, _, step := deadlineAgent(t)
	pod := apiPod("gated", v1.RestartPolicyAlways, []string{"main"})
	const gate = v1.PodConditionType("example.com/gate")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate}}
	f.send(podsource.ADD, pod)
	ready := func(want v1.ConditionStatus) func(v1.PodStatus) bool {
		return func(s v1.PodStatus) bool {
			for _, c := range s.Conditions {
				if c.Type == v1.PodReady {
					return c.Status == want
				}
			}
			return false
		}
	}
	st := step("gated", "running, not Ready (the gate's condition is missing)", func(s v1.PodStatus) bool {
		return s.Phase == v1.PodRunning && ready(v1.ConditionFalse)(s)
	})
	for _, want := range []v1.ConditionStatus{v1.ConditionTrue, v1.ConditionFalse, v1.ConditionTrue} {
		withGate := pod.DeepCopy()
		withGate.Status = *st.DeepCopy()
		// The gate's condition, set anew (the last status has the one
		// before, kept from the pod's own status as the kubelet keeps it).
		withGate.Status.Conditions = slices.DeleteFunc(withGate.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == gate })
		withGate.Status.Conditions = append(withGate.Status.Conditions, v1.PodCondition{Type: gate, Status: want})
		f.send(podsource.RECONCILE, withGate)
		// At most 5 s of the clock: a relist each second lets the pod's
		// worker see a fresh runtime status, as on a node.
		seen := false
		for i := 0; i < 5 && !seen; i++ {
			clk.Step(time.Second)
			deadline := time.Now().Add(2 * time.Second)
			for !seen && time.Now().Before(deadline) {
				s, ok := f.history.last("gated")
				if seen = ok && ready(want)(s); seen {
					st = s
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
		if !seen {
			t.Fatalf("not Ready %s within 5 s of the clock after the gate went %s:\n%s", want, want, f.history.describe("gated"))
		}
	}
}
