package runtime_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

func TestRestartAllTriggered(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	all42 := []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init", RestartPolicy: &never, RestartPolicyRules: all42}},
		Containers:     []v1.Container{{Name: "main", RestartPolicy: &never, RestartPolicyRules: all42}, {Name: "other"}},
	}}
	ctr := func(name string, state runtime.ContainerState, code int) *runtime.ContainerStatus {
		return &runtime.ContainerStatus{Name: name, State: state, ExitCode: code}
	}
	exited := runtime.ContainerStateExited
	for _, tc := range []struct {
		name string
		cs   []*runtime.ContainerStatus // newest first
		want bool
	}{
		{"nothing observed", nil, false},
		{"regular container exited 42", []*runtime.ContainerStatus{ctr("main", exited, 42)}, true},
		{"init container exited 42", []*runtime.ContainerStatus{ctr("init", exited, 42)}, true},
		{"exit code not matched", []*runtime.ContainerStatus{ctr("main", exited, 1)}, false},
		{"42 from a container without the rule", []*runtime.ContainerStatus{ctr("other", exited, 42)}, false},
		{"an older instance exited 42, the newest runs", []*runtime.ContainerStatus{ctr("main", runtime.ContainerStateRunning, 0), ctr("main", exited, 42)}, false},
		{"unknown state with code 42 is no exit", []*runtime.ContainerStatus{ctr("main", runtime.ContainerStateUnknown, 42)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runtime.RestartAllTriggered(pod, &runtime.PodStatus{ContainerStatuses: tc.cs}); got != tc.want {
				t.Errorf("RestartAllTriggered = %v, want %v", got, tc.want)
			}
		})
	}
}
