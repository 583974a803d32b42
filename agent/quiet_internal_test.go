package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// Housekeeping is quiet once the node's pods all run and are wanted; a
// pod the runtime runs and no source wants (an orphan), or a manifest
// removed, makes it busy until the pod is gone.
func TestHousekeepingQuiet(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		doc := "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers: [{name: main, image: \"busybox:1.36\"}]\n"
		if err := os.WriteFile(filepath.Join(manifests, name+".yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.89.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	src, err := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: "node", Period: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{src},
		RelistPeriod: 10 * time.Millisecond, HousekeepingPeriod: time.Hour,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
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
	running := func(want int) func() bool {
		return func() bool {
			n := 0
			for _, p := range a.Pods() {
				if p.Status.Phase == v1.PodRunning {
					n++
				}
			}
			return n == want
		}
	}
	if a.HandlePodCleanups(ctx); a.housekeepingQuiet() {
		t.Error("quiet before the file source was seen and its pods started")
	}
	quietWhen("both pods running", running(2))

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
	quietWhen("pod b gone", func() bool { return len(a.status.UIDs()) == 1 && running(1)() })
}
