package admission_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/admission"
)

func priority(p int32) func(*v1.Pod) { return func(pod *v1.Pod) { pod.Spec.Priority = &p } }

// guaranteed sets limits equal to the requests.
func guaranteed(p *v1.Pod) {
	p.Spec.Containers[0].Resources.Limits = p.Spec.Containers[0].Resources.Requests
}

func names(pods []*v1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

func TestPreempting(t *testing.T) {
	critical := priority(admission.SystemCriticalPriority)
	static := func(p *v1.Pod) { p.Annotations = map[string]string{"kubernetes.io/config.source": "file"} }
	big := func(n *v1.Node) { n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("10") }
	tests := []struct {
		name     string
		pod      *v1.Pod
		others   []*v1.Pod
		node     *v1.Node
		want     admission.Result // Preemption left out
		preempt  string           // the pods preempted, in order
		resource v1.ResourceName
	}{
		{name: "a pod that fits preempts nothing", node: node(big), pod: pod("crit", critical, requests("500m", "")),
			others: []*v1.Pod{pod("b", requests("500m", ""))}, want: admission.Result{Admit: true}},
		{name: "a pod that is not critical is refused", node: node(big), pod: pod("a", priority(1000), requests("500m", "")),
			others: []*v1.Pod{pod("b", requests("800m", ""))},
			want:   admission.Result{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 500, used: 800, capacity: 1000"}},
		// 400m short (the BestEffort pod frees no cpu): the 600m
		// Burstable pod alone frees it; the Guaranteed one is spared.
		{name: "the single pod that frees enough", node: node(big), pod: pod("crit", critical, requests("500m", "")),
			others: []*v1.Pod{pod("be"), pod("small", requests("200m", "")), pod("mid", requests("600m", "")), pod("g", requests("100m", "100Mi"), guaranteed)},
			want:   admission.Result{Admit: true}, preempt: "mid", resource: v1.ResourceCPU},
		// 1Gi of memory short (none free): the Burstable pods go rather
		// than the Guaranteed one, the closest to what is missing first.
		{name: "Guaranteed pods are spared", node: node(big, func(n *v1.Node) { n.Status.Allocatable[v1.ResourceMemory] = resource.MustParse("3260Mi") }),
			pod: pod("crit", static, requests("", "1Gi")),
			others: []*v1.Pod{
				pod("g", requests("100m", "2Gi"), guaranteed), pod("b512", requests("", "512Mi")), pod("b600", requests("", "600Mi")), pod("b100", requests("", "100Mi")),
			},
			want: admission.Result{Admit: true}, preempt: "b600,b512", resource: v1.ResourceMemory},
		// 600m short: the Burstable pod's 100m cannot do it, so the
		// Guaranteed pod goes, and then the Burstable one need not.
		{name: "a Guaranteed pod when nothing else frees enough", node: node(big), pod: pod("crit", critical, requests("800m", "")),
			others: []*v1.Pod{pod("g", requests("700m", "10Mi"), guaranteed), pod("b", requests("100m", ""))},
			want:   admission.Result{Admit: true}, preempt: "g", resource: v1.ResourceCPU},
		// The pod count: one pod must go; of equals, the last.
		{name: "pods", node: node(), pod: pod("crit", critical),
			others: []*v1.Pod{pod("x"), pod("y")},
			want:   admission.Result{Admit: true}, preempt: "y", resource: v1.ResourcePods},
		// Every resource short is freed: cpu and memory, by one pod each.
		{name: "cpu and memory", node: node(big), pod: pod("crit", critical, requests("500m", "500Mi")),
			others: []*v1.Pod{pod("cpu", requests("900m", "")), pod("mem", requests("", "900Mi"))},
			want:   admission.Result{Admit: true}, preempt: "cpu,mem", resource: v1.ResourceCPU},
		// Critical pods are not preempted by a critical pod of the same
		// priority, nor static ones by a pod without priority.
		{name: "nothing to preempt", node: node(big), pod: pod("crit", critical, requests("500m", "")),
			others: []*v1.Pod{pod("other", critical, requests("800m", "")), pod("s", static, requests("100m", ""))},
			want: admission.Result{Reason: "UnexpectedAdmissionError",
				Message: "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 400), ]"}},
		// A higher priority preempts a critical pod of lower priority.
		{name: "a lower-priority critical pod", node: node(big), pod: pod("crit", priority(admission.SystemCriticalPriority+1000), requests("500m", "")),
			others: []*v1.Pod{pod("other", critical, requests("800m", ""))},
			want:   admission.Result{Admit: true}, preempt: "other", resource: v1.ResourceCPU},
		// What preemption cannot help is checked first, as the kubelet
		// does: the node affinity failure is the answer, and no pod goes.
		{name: "node affinity first", node: node(big), pod: pod("crit", critical, requests("500m", ""), func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }),
			others: []*v1.Pod{pod("b", requests("800m", ""))},
			want:   admission.Result{Reason: "NodeAffinity", Message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := admission.Preempting(admission.Attributes{Pod: tc.pod, OtherPods: tc.others, Node: tc.node})
			p := got.Preemption
			got.Preemption = nil
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Preempting (-want +got):\n%s", d)
			}
			switch {
			case tc.preempt == "" && p != nil:
				t.Errorf("preempted %s, want none", names(p.Pods))
			case tc.preempt != "" && (p == nil || names(p.Pods) != tc.preempt || p.Resource != tc.resource):
				var got string
				if p != nil {
					got = names(p.Pods) + " for " + string(p.Resource)
				}
				t.Errorf("preempted %q, want %s for %s", got, tc.preempt, tc.resource)
			}
		})
	}
}

// Defaults preempts for critical pods only with Options.Preemption, and
// a pod refused later in the chain preempts nothing.
func TestDefaultsPreemption(t *testing.T) {
	crit := pod("crit", priority(admission.SystemCriticalPriority), requests("500m", ""))
	others := []*v1.Pod{pod("b", requests("800m", ""))}
	off, err := admission.Defaults(admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := off.Admit(admission.Attributes{Pod: crit, OtherPods: others, Node: node()}); got.Admit || got.Reason != "OutOfcpu" {
		t.Errorf("without Preemption: %+v, want OutOfcpu", got)
	}
	on, err := admission.Defaults(admission.Options{Preemption: true})
	if err != nil {
		t.Fatal(err)
	}
	got := on.Admit(admission.Attributes{Pod: crit, OtherPods: others, Node: node()})
	if !got.Admit || got.Preemption == nil || names(got.Preemption.Pods) != "b" {
		t.Errorf("with Preemption: %+v, want admitted preempting b", got)
	}
	refuse := append(on, admission.HandlerFunc(func(admission.Attributes) admission.Result { return admission.Result{Reason: "Mine"} }))
	if got := refuse.Admit(admission.Attributes{Pod: crit, OtherPods: others, Node: node()}); got.Admit || got.Reason != "Mine" || got.Preemption != nil {
		t.Errorf("refused later in the chain: %+v, want Mine without preemption", got)
	}
}
