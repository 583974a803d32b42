package cri_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// TestBurstableTierShares: the burstable tier's CPU shares are those of
// the sum of its pods' CPU requests, as the kubelet's QoS cgroup manager
// sets them: guaranteed and best-effort pods count nothing, a resize
// changes the sum, and a killed pod leaves it; with none left the tier
// has the minimum, 2.
func TestBurstableTierShares(t *testing.T) {
	mount := fakeCgroupV1(t)
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.CgroupRoot, c.CgroupMount = "/kubepods", mount })
	tier := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(mount, "cpu/kubepods/burstable/cpu.shares"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	pod := func(uid string, r v1.ResourceRequirements) *v1.Pod {
		p := testPod(v1.RestartPolicyAlways, nil, "app")
		p.UID, p.Name = types.UID(uid), uid
		p.Spec.Containers[0].Resources = r
		return p
	}
	small := pod("small", resources("100m", "200m", "64Mi", "128Mi"))
	big := pod("big", resources("400m", "", "64Mi", ""))
	guaranteed := pod("guaranteed", resources("1", "1", "64Mi", "64Mi"))
	bestEffort := pod("best-effort", v1.ResourceRequirements{})

	h.sync(small)
	if got := tier(); got != "102" { // 100m
		t.Errorf("with one burstable pod the tier has %s shares, want 102", got)
	}
	h.sync(big)
	h.sync(guaranteed)
	h.sync(bestEffort)
	if got := tier(); got != "512" { // 500m: the guaranteed and best-effort pods count nothing
		t.Errorf("with two burstable pods the tier has %s shares, want 512", got)
	}
	small.Spec.Containers[0].Resources = resources("300m", "400m", "64Mi", "128Mi")
	h.sync(small)
	if got := tier(); got != "716" { // 700m
		t.Errorf("after a resize to 300m the tier has %s shares, want 716", got)
	}
	for _, p := range []*v1.Pod{big, small} {
		if err := h.rt.KillPod(h.ctx, p, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := tier(); got != "2" {
		t.Errorf("with no burstable pod left the tier has %s shares, want 2", got)
	}
}
