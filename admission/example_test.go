package admission_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
