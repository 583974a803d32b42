package cri_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
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
	h := newHarness(t, fakecri.Config{}, withCgroups(mount))
	tier := func() string { t.Helper(); return tierShares(t, mount, "burstable") }
	small := sizedPod("small", resources("100m", "200m", "64Mi", "128Mi"))
	big := sizedPod("big", resources("400m", "", "64Mi", ""))
	guaranteed := sizedPod("guaranteed", resources("1", "1", "64Mi", "64Mi"))
	bestEffort := sizedPod("best-effort", v1.ResourceRequirements{})

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

func withCgroups(mount string) func(*cri.Config) {
	return func(c *cri.Config) { c.CgroupRoot, c.CgroupMount = "/kubepods", mount }
}

// tierShares reads a QoS tier's cpu.shares.
func tierShares(t *testing.T, mount, tier string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mount, "cpu/kubepods", tier, "cpu.shares"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// sizedPod is a one-container pod with the resources.
func sizedPod(uid string, r v1.ResourceRequirements) *v1.Pod {
	p := testPod(v1.RestartPolicyAlways, nil, "app")
	p.UID, p.Name = types.UID(uid), uid
	p.Spec.Containers[0].Resources = r
	return p
}

// TestQoSTiersAfterRestart: a runtime started over the pod cgroups of an
// earlier one counts their burstable pods from their cgroups' shares
// before it syncs them, so the tier keeps every running pod's share and
// a pod removed without a sync leaves it; the best-effort tier gets its
// 2 shares whatever it held.
func TestQoSTiersAfterRestart(t *testing.T) {
	mount := fakeCgroupV1(t)
	before := newHarness(t, fakecri.Config{}, withCgroups(mount))
	small := sizedPod("small", resources("100m", "200m", "64Mi", "128Mi"))
	big := sizedPod("big", resources("400m", "", "64Mi", ""))
	before.sync(small)
	before.sync(big)
	if err := os.WriteFile(filepath.Join(mount, "cpu/kubepods/besteffort/cpu.shares"), []byte("1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	after := newHarness(t, fakecri.Config{}, withCgroups(mount))
	after.sync(small)
	if got := tierShares(t, mount, "burstable"); got != "512" {
		t.Errorf("after a restart and one pod synced the tier has %s shares, want 512 (both pods)", got)
	}
	if got := tierShares(t, mount, "besteffort"); got != "2" {
		t.Errorf("the best-effort tier has %s shares, want 2", got)
	}
	if err := after.rt.KillPod(after.ctx, big, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := tierShares(t, mount, "burstable"); got != "102" {
		t.Errorf("after the pod never synced since the restart was killed the tier has %s shares, want 102", got)
	}
}

// TestQoSTierWriteFailure: a tier that cannot be written does not stop
// the pod's sync, as for the kubelet, which logs it; the garbage
// collection writes it again.
func TestQoSTierWriteFailure(t *testing.T) {
	mount := fakeCgroupV1(t)
	h := newHarness(t, fakecri.Config{}, withCgroups(mount))
	shares := filepath.Join(mount, "cpu/kubepods/burstable/cpu.shares")
	if err := os.MkdirAll(shares, 0o755); err != nil { // unwritable as a file
		t.Fatal(err)
	}
	pod := sizedPod("small", resources("100m", "200m", "64Mi", "128Mi"))
	res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
	if err := res.Error(); err != nil {
		t.Fatalf("the sync failed on the tier: %v", err)
	}
	if err := os.Remove(shares); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shares, []byte("1024\n"), 0o644); err != nil { // as the kernel makes it
		t.Fatal(err)
	}
	h.sync(pod) // steady: nothing to do, the tier is not its business
	if err := h.rt.GarbageCollect(h.ctx, runtime.GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1}, func(types.UID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if got := tierShares(t, mount, "burstable"); got != "102" {
		t.Errorf("after the failed write and a garbage collection the tier has %s shares, want 102", got)
	}
}
