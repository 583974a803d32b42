package podutil_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/internal/podutil"
)

func TestQOSClass(t *testing.T) {
	q := resource.MustParse
	pod := func(reqs, lims v1.ResourceList) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{Requests: reqs, Limits: lims}}}}}
	}
	podLevel := func(reqs, lims, creqs, clims v1.ResourceList) *v1.Pod {
		p := pod(creqs, clims)
		p.Spec.Resources = &v1.ResourceRequirements{Requests: reqs, Limits: lims}
		return p
	}
	both := v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"nothing set", pod(nil, nil), v1.PodQOSBestEffort},
		{"limits only", pod(nil, both), v1.PodQOSGuaranteed},
		{"equal requests and limits", pod(both, both), v1.PodQOSGuaranteed},
		{"requests below limits", pod(v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("1Gi")}, both), v1.PodQOSBurstable},
		{"requests only", pod(both, nil), v1.PodQOSBurstable},
		{"cpu limit only", pod(nil, v1.ResourceList{v1.ResourceCPU: q("1")}), v1.PodQOSBurstable},
		{"pod-level limits over best-effort containers", podLevel(nil, both, nil, nil), v1.PodQOSGuaranteed},
		{"pod-level requests only", podLevel(both, nil, nil, nil), v1.PodQOSBurstable},
		{"pod-level requests below limits", podLevel(v1.ResourceList{v1.ResourceMemory: q("512Mi")}, both, nil, nil), v1.PodQOSBurstable},
		{"pod-level limits decide over guaranteed containers", podLevel(nil, v1.ResourceList{v1.ResourceCPU: q("1")}, both, both), v1.PodQOSBurstable},
		{"empty pod-level resources", podLevel(nil, nil, both, both), v1.PodQOSBestEffort},
	} {
		if got := podutil.QOSClass(tc.pod); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestIsStatic(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        bool
	}{
		{nil, false},
		{map[string]string{"kubernetes.io/config.source": "api"}, false},
		{map[string]string{"kubernetes.io/config.source": "file"}, true},
		{map[string]string{"kubernetes.io/config.source": "http"}, true},
	} {
		p := &v1.Pod{}
		p.Annotations = tc.annotations
		if got := podutil.IsStatic(p); got != tc.want {
			t.Errorf("IsStatic with %v = %v, want %v", tc.annotations, got, tc.want)
		}
	}
}
