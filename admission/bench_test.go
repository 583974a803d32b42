package admission_test

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/admission"
)

// BenchmarkAdmit1000 is one admission decision of the default chain for
// a pod joining 999 others: "fits", a pod that fits; "preempting", with
// Options.Preemption, a critical pod on a node whose cpu is all taken,
// admitted in place of one of them.
func BenchmarkAdmit1000(b *testing.B) {
	for _, tc := range []struct {
		name    string
		cpu     string // allocatable
		pod     *v1.Pod
		preempt bool
	}{
		{name: "fits", cpu: "128", pod: pod("new", requests("100m", "100Mi"))},
		{name: "preempting", cpu: "99900m", pod: pod("new", priority(admission.SystemCriticalPriority), requests("100m", "100Mi")), preempt: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			chain, err := admission.Defaults(admission.Options{Preemption: tc.preempt})
			if err != nil {
				b.Fatal(err)
			}
			n := node(func(n *v1.Node) {
				n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("1000")
				n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse(tc.cpu)
				n.Status.Allocatable[v1.ResourceMemory] = resource.MustParse("256Gi")
			})
			others := make([]*v1.Pod, 0, 999)
			for i := range 999 {
				others = append(others, pod(fmt.Sprintf("p%d", i), requests("100m", "100Mi")))
			}
			b.ReportAllocs()
			for b.Loop() {
				r := chain.Admit(admission.Attributes{Pod: tc.pod, OtherPods: others, Node: n})
				if !r.Admit || (r.Preemption != nil) != tc.preempt {
					b.Fatal(r)
				}
			}
		})
	}
}
