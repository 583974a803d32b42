package podutil_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/podutil"
)

func rule(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

func TestMatchingRestartRule(t *testing.T) {
	in := rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 42, 50, 60)
	notIn := rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 1, 2)
	in42 := rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	for _, tc := range []struct {
		name  string
		rules []v1.ContainerRestartRule
		code  int32
		want  *v1.ContainerRestartRule
	}{
		{"In matches", []v1.ContainerRestartRule{in}, 42, &in},
		{"NotIn matches", []v1.ContainerRestartRule{notIn}, 99, &notIn},
		{"NotIn does not match a listed code", []v1.ContainerRestartRule{notIn}, 1, nil},
		{"the first of two matching rules", []v1.ContainerRestartRule{in, in42}, 42, &in},
		{"no rule matches", []v1.ContainerRestartRule{in}, 100, nil},
		{"no rules", nil, 0, nil},
		{"a rule without exit codes never matches", []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}, 0, nil},
		{"an unknown operator never matches", []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestart, "Maybe", 3)}, 3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := podutil.MatchingRestartRule(&v1.Container{RestartPolicyRules: tc.rules}, tc.code)
			if ok != (tc.want != nil) {
				t.Fatalf("found = %v, want %v", ok, tc.want != nil)
			}
			if tc.want != nil {
				if d := cmp.Diff(*tc.want, got); d != "" {
					t.Errorf("rule (-want +got):\n%s", d)
				}
			}
		})
	}
}

// The cases of the kubelet's ContainerShouldRestart with the
// ContainerRestartRules feature on.
func TestContainerShouldRestart(t *testing.T) {
	always, onFailure, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	restart42 := rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	all42 := rule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	for _, tc := range []struct {
		name   string
		pod    v1.RestartPolicy
		policy *v1.ContainerRestartPolicy
		rules  []v1.ContainerRestartRule
		code   int32
		want   bool
	}{
		{"pod Always, exit 0", v1.RestartPolicyAlways, nil, nil, 0, true},
		{"pod Always, exit 1", v1.RestartPolicyAlways, nil, nil, 1, true},
		{"pod OnFailure, exit 0", v1.RestartPolicyOnFailure, nil, nil, 0, false},
		{"pod OnFailure, exit 1", v1.RestartPolicyOnFailure, nil, nil, 1, true},
		{"pod Never, exit 1", v1.RestartPolicyNever, nil, nil, 1, false},
		{"empty pod policy counts as Always", "", nil, nil, 0, true},
		{"container Always over pod Never", v1.RestartPolicyNever, &always, nil, 0, true},
		{"container Never over pod Always", v1.RestartPolicyAlways, &never, nil, 1, false},
		{"container OnFailure over pod Always, exit 0", v1.RestartPolicyAlways, &onFailure, nil, 0, false},
		{"container OnFailure over pod Never, exit 3", v1.RestartPolicyNever, &onFailure, nil, 3, true},
		{"rule matches: restart despite Never", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{restart42}, 42, true},
		{"rule does not match: container Never", v1.RestartPolicyAlways, &never, []v1.ContainerRestartRule{restart42}, 1, false},
		{"rule does not match: container OnFailure, exit 0", v1.RestartPolicyAlways, &onFailure, []v1.ContainerRestartRule{restart42}, 0, false},
		{"rules without a container policy are not looked at", v1.RestartPolicyNever, nil, []v1.ContainerRestartRule{restart42}, 42, false},
		{"RestartAllContainers rule matches: restart despite Never", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{all42}, 42, true},
		{"RestartAllContainers rule does not match: container Never", v1.RestartPolicyAlways, &never, []v1.ContainerRestartRule{all42}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", RestartPolicy: tc.policy, RestartPolicyRules: tc.rules}
			spec := &v1.PodSpec{RestartPolicy: tc.pod}
			if got := podutil.ContainerShouldRestart(c, spec, tc.code); got != tc.want {
				t.Errorf("ContainerShouldRestart = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRestartsOnProbeFailure(t *testing.T) {
	always, onFailure, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	restart := []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpNotIn)}
	for _, tc := range []struct {
		name   string
		pod    v1.RestartPolicy
		policy *v1.ContainerRestartPolicy
		rules  []v1.ContainerRestartRule
		want   bool
	}{
		{"pod Always", v1.RestartPolicyAlways, nil, nil, true},
		{"pod OnFailure", v1.RestartPolicyOnFailure, nil, nil, true},
		{"pod Never", v1.RestartPolicyNever, nil, nil, false},
		{"container Always over pod Never", v1.RestartPolicyNever, &always, nil, true},
		{"container OnFailure over pod Never", v1.RestartPolicyNever, &onFailure, nil, true},
		{"container Never over pod Always", v1.RestartPolicyAlways, &never, nil, false},
		{"rules are not looked at", v1.RestartPolicyAlways, &never, restart, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", RestartPolicy: tc.policy, RestartPolicyRules: tc.rules}
			if got := podutil.RestartsOnProbeFailure(c, &v1.PodSpec{RestartPolicy: tc.pod}); got != tc.want {
				t.Errorf("RestartsOnProbeFailure = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRestartsAllContainers(t *testing.T) {
	all42 := rule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	restart42 := rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	allNot0 := rule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)
	for _, tc := range []struct {
		name  string
		rules []v1.ContainerRestartRule
		code  int32
		want  bool
	}{
		{"In matches", []v1.ContainerRestartRule{all42}, 42, true},
		{"In does not match", []v1.ContainerRestartRule{all42}, 1, false},
		{"NotIn matches", []v1.ContainerRestartRule{allNot0}, 137, true},
		{"a Restart rule first wins", []v1.ContainerRestartRule{restart42, all42}, 42, false},
		{"a RestartAllContainers rule first wins", []v1.ContainerRestartRule{all42, restart42}, 42, true},
		{"no rules", nil, 42, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			never := v1.ContainerRestartPolicyNever
			if got := podutil.RestartsAllContainers(&v1.Container{RestartPolicy: &never, RestartPolicyRules: tc.rules}, tc.code); got != tc.want {
				t.Errorf("RestartsAllContainers = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMayRestartAllContainers(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	all42 := []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 42)}
	restart42 := []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 42)}
	c := func(rules []v1.ContainerRestartRule) v1.Container {
		return v1.Container{Name: "c", RestartPolicy: &never, RestartPolicyRules: rules}
	}
	for _, tc := range []struct {
		name string
		spec v1.PodSpec
		want bool
	}{
		{"regular container", v1.PodSpec{Containers: []v1.Container{c(nil), c(all42)}}, true},
		{"init container", v1.PodSpec{InitContainers: []v1.Container{c(all42)}, Containers: []v1.Container{c(nil)}}, true},
		{"only Restart rules", v1.PodSpec{InitContainers: []v1.Container{c(restart42)}, Containers: []v1.Container{c(restart42)}}, false},
		{"no rules", v1.PodSpec{Containers: []v1.Container{c(nil)}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podutil.MayRestartAllContainers(&tc.spec); got != tc.want {
				t.Errorf("MayRestartAllContainers = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRestartingAllContainers(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	all42 := []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 42)}
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init", RestartPolicy: &never, RestartPolicyRules: all42}},
		Containers:     []v1.Container{{Name: "main", RestartPolicy: &never, RestartPolicyRules: all42}, {Name: "other"}},
	}}
	exited := func(name string, code int32) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
	}
	for _, tc := range []struct {
		name string
		s    *v1.PodStatus
		want bool
	}{
		{"no status", nil, false},
		{"condition True", &v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionTrue}}}, true},
		{"condition False", &v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionFalse}}}, false},
		{"regular container exited with a matching code", &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{exited("main", 42)}}, true},
		{"init container exited with a matching code", &v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{exited("init", 42)}}, true},
		{"exit code not matched", &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{exited("main", 1)}}, false},
		{"code 42 from a container without the rule", &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{exited("other", 42)}}, false},
		{"last state is not looked at", &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "main",
			LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 42}}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podutil.RestartingAllContainers(pod, tc.s); got != tc.want {
				t.Errorf("RestartingAllContainers = %v, want %v", got, tc.want)
			}
		})
	}
}
