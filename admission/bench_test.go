package admission_test

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/admission"
)

// BenchmarkAdmit1000 is one admission decision of the default chain for
// a pod joining 999 others that fit on the node.
func BenchmarkAdmit1000(b *testing.B) {
	chain, err := admission.Defaults(admission.Options{})
	if err != nil {
		b.Fatal(err)
	}
	n := node(func(n *v1.Node) {
		n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("1000")
		n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("128")
		n.Status.Allocatable[v1.ResourceMemory] = resource.MustParse("256Gi")
	})
	others := make([]*v1.Pod, 0, 999)
	for i := range 999 {
		others = append(others, pod(fmt.Sprintf("p%d", i), requests("100m", "100Mi")))
	}
	p := pod("new", requests("100m", "100Mi"))
	b.ReportAllocs()
	for b.Loop() {
		if r := chain.Admit(admission.Attributes{Pod: p, OtherPods: others, Node: n}); !r.Admit {
			b.Fatal(r)
		}
	}
}
