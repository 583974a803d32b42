package admission_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
)

func Example() {
	chain, err := admission.Defaults(admission.Options{})
	if err != nil {
		panic(err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1"}}
	node.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	big := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")},
		}}}},
	}
	res := chain.Admit(admission.Attributes{Pod: big, Node: node})
	fmt.Println(res.Admit, res.Reason)
	fmt.Println(res.Message)
	// Output:
	// false OutOfcpu
	// Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000
}

// A critical pod that does not fit is admitted in place of the pods
// whose requests free what it lacks; the caller stops them.
func ExamplePreempting() {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1"}}
	node.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	withCPU := func(name, cpu string, priority int32) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
			Spec: v1.PodSpec{Priority: &priority, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)},
			}}}},
		}
	}
	running := []*v1.Pod{withCPU("batch", "1500m", 0), withCPU("web", "400m", 1000)}
	dns := withCPU("node-dns", "500m", admission.SystemCriticalPriority)

	chain, err := admission.Defaults(admission.Options{Preemption: true})
	if err != nil {
		panic(err)
	}
	res := chain.Admit(admission.Attributes{Pod: dns, OtherPods: running, Node: node})
	fmt.Println(res.Admit, res.Preemption.Resource)
	for _, p := range res.Preemption.Pods {
		fmt.Printf("stop %s: %s, %s\n", p.Name, admission.ReasonPreempting, admission.PreemptionMessage)
	}
	// Output:
	// true cpu
	// stop web: Preempting, Preempted in order to admit critical pod
}
