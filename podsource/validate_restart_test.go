package podsource_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podsource"
)

func restartRule(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

// Per-container restartPolicy and restartPolicyRules, as the API server
// validates them with the ContainerRestartRules and
// RestartAllContainersOnContainerExits features (its cases in
// validation_test.go), on regular, init and sidecar containers.
func TestValidateContainerRestartRules(t *testing.T) {
	always, onFailure, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	invalid, empty := v1.ContainerRestartPolicy("invalid"), v1.ContainerRestartPolicy("")
	restart42 := restartRule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	many := make([]v1.ContainerRestartRule, 21)
	for i := range many {
		many[i] = restart42
	}
	type tc struct {
		name   string
		policy *v1.ContainerRestartPolicy
		rules  []v1.ContainerRestartRule
		want   string // "" for valid; the path is relative to the container
	}
	common := []tc{
		{"Never with a Restart rule", &never, []v1.ContainerRestartRule{restart42}, ""},
		{"OnFailure with a NotIn rule", &onFailure, []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 1)}, ""},
		{"Never alone", &never, nil, ""},
		{"OnFailure alone", &onFailure, nil, ""},
		{"Always with a Restart rule", &always, []v1.ContainerRestartRule{restart42}, ""},
		{"20 rules", &never, many[:20], ""},
		{"invalid policy", &invalid, nil, `restartPolicy: Unsupported value: "invalid"`},
		{"empty policy", &empty, nil, `restartPolicy: Unsupported value: ""`},
		{"rules without a policy", nil, []v1.ContainerRestartRule{restart42}, "restartPolicy: Required value: must specify restartPolicy when restart rules are used"},
		{"invalid action", &never, []v1.ContainerRestartRule{restartRule("invalid", v1.ContainerRestartRuleOnExitCodesOpIn, 42)}, `restartPolicyRules[0].action: Unsupported value: "invalid": supported values: "Restart", "RestartAllContainers"`},
		{"empty action", &never, []v1.ContainerRestartRule{restartRule("", v1.ContainerRestartRuleOnExitCodesOpIn, 42)}, `restartPolicyRules[0].action: Unsupported value: ""`},
		{"RestartAllContainers", &never, []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 42)}, ""},
		{"RestartAllContainers with NotIn beside Restart", &onFailure, []v1.ContainerRestartRule{restart42,
			restartRule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)}, ""},
		{"Always (a sidecar among init containers) with a RestartAllContainers rule", &always, []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 42)}, ""},
		{"RestartAllContainers without exit codes", &never, []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers}}, "restartPolicyRules[0].exitCodes: Required value"},
		{"no exit codes", &never, []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}, "restartPolicyRules[0].exitCodes: Required value"},
		{"invalid operator", &never, []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleActionRestart, "invalid", 42)}, `restartPolicyRules[0].exitCodes.operator: Unsupported value: "invalid"`},
		{"empty operator", &never, []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleActionRestart, "", 42)}, `restartPolicyRules[0].exitCodes.operator: Unsupported value: ""`},
		{"256 exit codes", &never, []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, make([]int32, 256)...)},
			"restartPolicyRules[0].exitCodes.values: Too many: 256: must have at most 255 items"},
		{"21 rules", &never, many, "restartPolicyRules: Too many: 21: must have at most 20 items"},
	}
	for _, kind := range []string{"containers", "initContainers"} {
		for _, c := range common {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{
					RestartPolicy: v1.RestartPolicyNever,
					Containers:    []v1.Container{{Name: "main", Image: "busybox:1.36"}},
				}}
				target := &p.Spec.Containers[0]
				if kind == "initContainers" {
					p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1.36"}}
					target = &p.Spec.InitContainers[0]
				}
				target.RestartPolicy, target.RestartPolicyRules = c.policy, c.rules
				got := podsource.Validate(p).ToAggregate()
				want := ""
				if c.want != "" {
					want = "spec." + kind + "[0]." + c.want
				}
				switch {
				case want == "" && got != nil:
					t.Errorf("unexpected errors: %v", got)
				case want != "" && (got == nil || !strings.Contains(got.Error(), want)):
					t.Errorf("errors %v, want %q", got, want)
				}
			})
		}
	}
}

// Ephemeral containers may not be set on create (Validate, a manifest
// file), but a pod of an API server or a program that gains them is an
// update the Merger passes on, with the API server's defaults; ephemeral
// containers that break the API server's rules for them are refused,
// naming the pod and the field.
func TestEphemeralContainersComeWithUpdates(t *testing.T) {
	base := func() *v1.Pod {
		p := pod("e", "target")
		p.Spec.Volumes = []v1.Volume{{Name: "data"}}
		return p
	}
	debug := func(mutate func(*v1.EphemeralContainerCommon)) *v1.Pod {
		p := base()
		ec := v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1.36", Stdin: true, TTY: true,
			Command: []string{"sh"}, VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}
		if mutate != nil {
			mutate(&ec)
		}
		p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: ec, TargetContainerName: "c"}}
		return p
	}

	if got := podsource.Validate(debug(nil)).ToAggregate(); got == nil || !strings.Contains(got.Error(), "spec.ephemeralContainers: Forbidden: cannot be set on create") {
		t.Errorf("Validate of a new pod with an ephemeral container: %v, want it forbidden on create", got)
	}

	ch := podsource.NewChannel("api", 10)
	var ev events
	m, read := startMerger(t, &ev, ch)
	ctx := context.Background()
	send := func(pods ...*v1.Pod) {
		t.Helper()
		if err := ch.Send(ctx, podsource.Update{Op: podsource.SET, Pods: pods}); err != nil {
			t.Fatal(err)
		}
	}
	send(base())
	expectUpdates(t, read, "ADD api ns/target")
	send(debug(nil))
	expectUpdates(t, read, "UPDATE api ns/target")
	var got *v1.Pod
	for _, p := range m.Pods() {
		got = p
	}
	if got == nil || len(got.Spec.EphemeralContainers) != 1 {
		t.Fatalf("Merger holds %v, want the pod with its ephemeral container", got)
	}
	ec := got.Spec.EphemeralContainers[0]
	if ec.ImagePullPolicy != v1.PullIfNotPresent || ec.TerminationMessagePolicy != v1.TerminationMessageReadFile || ec.TerminationMessagePath != v1.TerminationMessagePathDefault {
		t.Errorf("ephemeral container without the API server's defaults: %+v", ec)
	}

	for i, bad := range []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{
		{"ports", func(p *v1.Pod) { p.Spec.EphemeralContainers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}} },
			"spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container"},
		{"resources", func(p *v1.Pod) {
			p.Spec.EphemeralContainers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
		}, "spec.ephemeralContainers[0].resources: Forbidden"},
		{"liveness probe", func(p *v1.Pod) {
			p.Spec.EphemeralContainers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}, "spec.ephemeralContainers[0].livenessProbe: Forbidden"},
		{"lifecycle", func(p *v1.Pod) {
			p.Spec.EphemeralContainers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}, "spec.ephemeralContainers[0].lifecycle: Forbidden"},
		{"restart policy", func(p *v1.Pod) {
			always := v1.ContainerRestartPolicyAlways
			p.Spec.EphemeralContainers[0].RestartPolicy = &always
		}, "spec.ephemeralContainers[0].restartPolicy: Forbidden"},
		{"subPath", func(p *v1.Pod) { p.Spec.EphemeralContainers[0].VolumeMounts[0].SubPath = "x" },
			"spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden"},
		{"name of a regular container", func(p *v1.Pod) { p.Spec.EphemeralContainers[0].Name = "c" },
			`spec.ephemeralContainers[0].name: Duplicate value: "c"`},
		{"unknown target", func(p *v1.Pod) { p.Spec.EphemeralContainers[0].TargetContainerName = "nope" },
			`spec.ephemeralContainers[0].targetContainerName: Not found: "nope"`},
		{"unknown volume", func(p *v1.Pod) { p.Spec.EphemeralContainers[0].VolumeMounts[0].Name = "nope" },
			"spec.ephemeralContainers[0].volumeMounts[0].name: Not found"},
	} {
		p := debug(nil)
		bad.mutate(p)
		p.Name, p.UID = fmt.Sprintf("bad-%d", i), types.UID(fmt.Sprintf("uid-bad-%d", i))
		send(debug(nil), p)
		expectEvent(t, &ev, "FailedValidation", fmt.Sprintf(`pod ns/bad-%d (UID "uid-bad-%d") from source api`, i, i), bad.want)
	}
	// None of the bad pods went out; a change to the good one does.
	p := debug(nil)
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger2", Image: "busybox:1.36"}})
	send(p)
	expectUpdates(t, read, "UPDATE api ns/target")
}

// A static pod is created from its manifest: ephemeral containers in it
// are refused, as on create.
func TestStaticPodWithEphemeralContainersIsRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "debug.yaml", `metadata: {name: debug}
spec:
  containers: [{name: c, image: busybox:1.36}]
  ephemeralContainers: [{name: e, image: busybox:1.36}]
`)
	write(t, dir, "web.yaml", webYAML)
	var ev events
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n", Events: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	u := next(t, run(t, src))
	if got := names(u.Pods); len(got) != 1 || got[0] != "default/web-n" {
		t.Errorf("pods %v, want only default/web-n", got)
	}
	expectEvent(t, &ev, "debug.yaml", "spec.ephemeralContainers: Forbidden: cannot be set on create")
}
