package eviction_test

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/eviction"
)

func Example() {
	u := func(v uint64) *uint64 { return &v }
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "default", UID: "hog-uid"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main"}}},
	}
	summary := &statsapi.Summary{
		Node: statsapi.NodeStats{Memory: &statsapi.MemoryStats{AvailableBytes: u(64 << 20), WorkingSetBytes: u(960 << 20)}},
		Pods: []statsapi.PodStats{{
			PodRef:     statsapi.PodReference{Name: "hog", Namespace: "default", UID: "hog-uid"},
			Memory:     &statsapi.MemoryStats{WorkingSetBytes: u(512 << 20)},
			Containers: []statsapi.ContainerStats{{Name: "main", Memory: &statsapi.MemoryStats{WorkingSetBytes: u(512 << 20)}}},
		}},
	}
	mgr, err := eviction.New(eviction.Config{
		Summary:    func(context.Context) (*statsapi.Summary, error) { return summary, nil },
		ActivePods: func() []*v1.Pod { return []*v1.Pod{pod} },
		Kill: func(_ context.Context, p *v1.Pod, e eviction.Eviction) error {
			fmt.Printf("kill %s within %ds: %s\n", p.Name, e.GracePeriod, strings.TrimSpace(e.Message))
			fmt.Printf("condition %s=%s, reason %s\n", e.DisruptionTarget.Type, e.DisruptionTarget.Status, e.DisruptionTarget.Reason)
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	mgr.Synchronize(context.Background())
	memory, disk, pid := mgr.Pressure()
	fmt.Println("memory pressure:", memory, "disk:", disk, "pid:", pid)
	// Output:
	// kill hog within 1s: The node was low on resource: memory. Threshold quantity: 100Mi, available: 64Mi. Container main was using 512Mi, request is 0, has larger consumption of memory.
	// condition DisruptionTarget=True, reason TerminationByKubelet
	// memory pressure: true disk: false pid: false
}

// Parse reads a kubelet's thresholds; with enforceNodeAllocatable
// [pods], the kubelet's default, the hard memory.available threshold
// also applies to the memory left to the pods.
func ExampleParse() {
	ts, err := eviction.Parse(eviction.Spec{
		Hard:                   map[string]string{"memory.available": "200Mi", "nodefs.available": "10%"},
		Soft:                   map[string]string{"memory.available": "500Mi"},
		SoftGracePeriod:        map[string]string{"memory.available": "1m30s"},
		EnforceNodeAllocatable: []string{eviction.NodeAllocatableEnforcementPods},
	})
	if err != nil {
		panic(err)
	}
	for _, t := range ts {
		fmt.Println(t, "hard:", t.Hard())
	}
	// Output:
	// memory.available<200Mi hard: true
	// nodefs.available<10% hard: true
	// memory.available<500Mi hard: false
	// allocatableMemory.available<200Mi hard: true
}
