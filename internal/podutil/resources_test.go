package podutil_test

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/internal/podutil"
)

func TestResourceFieldValue(t *testing.T) {
	q := resource.MustParse
	allocatable := v1.ResourceList{
		v1.ResourceCPU: q("3500m"), v1.ResourceMemory: q("8Gi"), v1.ResourceEphemeralStorage: q("100Gi"), "hugepages-2Mi": q("1Gi"),
	}
	c := v1.Container{Name: "app", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceMemory: q("128Mi"), v1.ResourceCPU: q("0")},
	}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	podLimits := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{c}, Resources: &v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceCPU: q("2"), v1.ResourceEphemeralStorage: q("1Gi")},
	}}}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		resource string
		divisor  string
		want     string // or an error fragment
		wantErr  bool
	}{
		{name: "cpu request in cores, rounded up", pod: pod, resource: "requests.cpu", want: "1"},
		{name: "cpu request in millicores", pod: pod, resource: "requests.cpu", divisor: "1m", want: "250"},
		{name: "memory limit set", pod: pod, resource: "limits.memory", divisor: "1Mi", want: "128"},
		{name: "zero cpu limit is the node's allocatable", pod: pod, resource: "limits.cpu", want: "4"},
		{name: "missing ephemeral-storage limit is the node's allocatable", pod: pod, resource: "limits.ephemeral-storage", divisor: "1Gi", want: "100"},
		{name: "missing request stays zero", pod: pod, resource: "requests.ephemeral-storage", want: "0"},
		{name: "hugepages limit is never defaulted", pod: pod, resource: "limits.hugepages-2Mi", want: "0"},
		{name: "pod-level cpu limit before the node's", pod: podLimits, resource: "limits.cpu", divisor: "1m", want: "2000"},
		{name: "pod-level ephemeral-storage is not a pod-level resource", pod: podLimits, resource: "limits.ephemeral-storage", divisor: "1Gi", want: "100"},
		{name: "the container's own limit before the pod's", pod: podLimits, resource: "limits.memory", divisor: "1Mi", want: "128"},
		{name: "unknown resource", pod: pod, resource: "limits.gpu", want: `unsupported resource "limits.gpu"`, wantErr: true},
		{name: "neither limits nor requests", pod: pod, resource: "cpu", want: `unsupported resource "cpu"`, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := &v1.ResourceFieldSelector{Resource: tc.resource}
			if tc.divisor != "" {
				ref.Divisor = q(tc.divisor)
			}
			got, err := podutil.ResourceFieldValue(tc.pod, &tc.pod.Spec.Containers[0], ref, allocatable)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tc.want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	// Without an allocatable, a missing limit shows zero.
	if got, err := podutil.ResourceFieldValue(pod, &pod.Spec.Containers[0], &v1.ResourceFieldSelector{Resource: "limits.cpu"}, nil); err != nil || got != "0" {
		t.Fatalf("no allocatable: got %q, %v; want 0", got, err)
	}
}
