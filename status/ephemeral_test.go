package status_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// Ephemeral containers get statuses of their own, as the kubelet reports
// them: their state, never ready and without a started flag, and no part
// in the pod's phase or readiness.
func TestEphemeralContainerStatuses(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, nil, "app")
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}},
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "done", Image: "busybox"}},
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "new", Image: "busybox"}},
	}
	for _, tc := range []struct {
		name string
		obs  *runtime.PodStatus
		want map[string]string
	}{
		{"running, exited, not created yet", observed(c("app", running, 0, 0), c("debugger", running, 0, 0), c("done", exited, 3, 0)),
			map[string]string{"debugger": "running", "done": `terminated 3  ""`, "new": "waiting ContainerCreating"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.Generate(status.Input{Pod: p, Runtime: tc.obs, Now: now})
			if len(s.EphemeralContainerStatuses) != len(tc.want) {
				t.Fatalf("%d ephemeral statuses, want %d: %+v", len(s.EphemeralContainerStatuses), len(tc.want), s.EphemeralContainerStatuses)
			}
			for _, st := range s.EphemeralContainerStatuses {
				if got := terminated(st.State); got != tc.want[st.Name] {
					t.Errorf("%s: %s, want %s", st.Name, got, tc.want[st.Name])
				}
				if st.Ready || st.Started != nil {
					t.Errorf("%s: ready %v started %v, want not ready and no started flag", st.Name, st.Ready, st.Started)
				}
			}
			if s.Phase != v1.PodRunning || condition(s, v1.PodReady).Status != v1.ConditionTrue {
				t.Errorf("phase %s ready %s, want Running and ready whatever the ephemeral containers do", s.Phase, condition(s, v1.PodReady).Status)
			}
			if len(s.ContainerStatuses) != 1 || len(s.InitContainerStatuses) != 0 {
				t.Errorf("ephemeral containers leaked into the other lists: %+v %+v", s.ContainerStatuses, s.InitContainerStatuses)
			}
		})
	}
}
