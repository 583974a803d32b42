package cri

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestHashCacheSeesInPlaceChanges(t *testing.T) {
	c := &v1.Container{
		Name: "app", Image: "busybox:1.36",
		Env:       []v1.EnvVar{{Name: "A", Value: "1"}},
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}},
		Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 1}}},
	}
	hc := newHashCache()
	spec := func() uint64 { return hc.hashes("uid", c).spec }
	h := hc.hashes("uid", c)
	first := h.spec
	if h.kubelet != HashContainer(c) || first != SpecHash(c) || h.specHex != strconv.FormatUint(first, 16) || spec() != first {
		t.Fatal("cached hashes differ from HashContainer and SpecHash")
	}
	for name, mutate := range map[string]func(){
		"env value":      func() { c.Env[0].Value = "2" },
		"new env":        func() { c.Env = append(c.Env, v1.EnvVar{Name: "B"}) },
		"nested pointer": func() { c.Lifecycle.PreStop.Sleep.Seconds = 2 },
		"security":       func() { c.SecurityContext = &v1.SecurityContext{RunAsUser: ptr.To[int64](1)} },
	} {
		before := spec()
		mutate()
		if got, want := spec(), SpecHash(c); got != want || got == before {
			t.Errorf("after changing the %s in place: cached %x, fresh %x, before %x", name, got, want, before)
		}
	}
	// Requests and limits are resized in place: not part of the hash.
	for name, mutate := range map[string]func(){
		"request":   func() { c.Resources.Requests[v1.ResourceCPU] = resource.MustParse("200m") },
		"new limit": func() { c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")} },
	} {
		before := spec()
		mutate()
		if got, want := spec(), SpecHash(c); got != want || got != before {
			t.Errorf("after changing the %s in place: cached %x, fresh %x, before %x", name, got, want, before)
		}
	}
}

func TestSpecHashCanonicalQuantities(t *testing.T) {
	a := &v1.Container{Name: "a", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}
	b := &v1.Container{Name: "a", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000m")}}}
	if SpecHash(a) != SpecHash(b) {
		t.Error("1 and 1000m CPU hash differently")
	}
	if !specEqual(a, b) {
		t.Error("1 and 1000m CPU compare unequal")
	}
}
