package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/cri"
)

// Housekeeping is quiet once the node's pods all run and are wanted; a
// pod the runtime runs and no source wants (an orphan), or a manifest
// removed, makes it busy until the pod is gone.
func TestHousekeepingQuiet(t *testing.T) {
	a, fake, manifests, ctx := runStaticAgent(t, []string{"a", "b"}, true)
	// quietWhen runs housekeeping until the node is quiet and cond holds.
	quietWhen := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if err := a.HandlePodCleanups(ctx); err != nil {
				t.Fatal(err)
			}
			if a.housekeepingQuiet() && cond() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not quiet with %s after 20s: quiet %v", what, a.housekeepingQuiet())
			}
		}
	}
	runs := func(want int) func() bool { return func() bool { return running(a) == want } }
	// Not quiet while the file source has not been seen. The agent runs
	// already, so the source may have been seen by now: the check holds
	// only for a pass that began and ended before it was.
	unseen := !a.merger.SeenAllSources()
	if a.HandlePodCleanups(ctx); unseen && !a.merger.SeenAllSources() && a.housekeepingQuiet() {
		t.Error("quiet before the file source was seen")
	}
	quietWhen("both pods running", runs(2))

	// An orphan: a sandbox the runtime runs for a pod no source has.
	sb, err := fake.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "orphan", Namespace: "default", Uid: "orphan-uid"},
		Labels:   map[string]string{cri.LabelPodUID: "orphan-uid", cri.LabelPodName: "orphan", cri.LabelPodNamespace: "default"},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	seen := func() bool { st, err := a.cache.Get("orphan-uid"); return err == nil && st.MayRun() }
	for deadline := time.Now().Add(20 * time.Second); !seen(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the PLEG did not see the orphan within 20s")
		}
	}
	if a.HandlePodCleanups(ctx); a.housekeepingQuiet() {
		t.Error("quiet with an orphan running")
	}
	quietWhen("the orphan killed", func() bool {
		list, err := fake.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: sb, State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
		return err == nil && len(list) == 0
	})

	// A manifest removed: busy until its pod is stopped and forgotten.
	if err := os.Remove(filepath.Join(manifests, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); len(a.Pods()) == 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the removal was not seen within 20s")
		}
	}
	if a.HandlePodCleanups(ctx); a.housekeepingQuiet() {
		t.Error("quiet right after a pod was removed")
	}
	quietWhen("pod b gone", func() bool { return len(a.status.UIDs()) == 1 && runs(1)() })
}
