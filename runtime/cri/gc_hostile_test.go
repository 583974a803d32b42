package cri_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// TestGarbageCollectStaysUnderThePodLogsDir plants sandboxes and
// containers whose metadata and log paths point out of the pod logs
// directory, and checks that GC removes them from the runtime but leaves
// the files they point at.
func TestGarbageCollectStaysUnderThePodLogsDir(t *testing.T) {
	root := t.TempDir()
	logs := filepath.Join(root, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	var lines logLines
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
		c.PodLogsDir = logs
		c.Logger = lines.logger()
	})
	victim := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// "../victim" as a namespace makes <logs>/../victim_p_uid-a.
	dirVictim := victim("victim_p_uid-a/keep")
	// A name with a slash would make a path of several elements.
	nested := victim("logs/a_b/c_uid-b/keep")
	// A sandbox log directory outside the logs root; its container's log
	// path is <root>/elsewhere/c/0.log.
	logVictim := victim("elsewhere/c/0.log")
	// A log directory under the root reached through a symlink out of it.
	if err := os.Symlink(filepath.Join(root, "elsewhere"), filepath.Join(logs, "link_p_uid-d")); err != nil {
		t.Fatal(err)
	}

	plant := func(uid, ns, name, logDir string, withContainer bool) {
		cfg := &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid},
			Labels:       map[string]string{cri.LabelPodUID: uid, cri.LabelPodName: name, cri.LabelPodNamespace: ns},
			LogDirectory: logDir,
		}
		sb, err := h.fake.RunPodSandbox(h.ctx, cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		if withContainer {
			id, err := h.fake.CreateContainer(h.ctx, sb, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
				Image:    &runtimeapi.ImageSpec{Image: "busybox:1.36"},
				Labels:   map[string]string{cri.LabelPodUID: uid, cri.LabelContainerName: "c"},
				LogPath:  "c/0.log",
			}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.fake.StartContainer(h.ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := h.fake.StopContainer(h.ctx, id, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.fake.StopPodSandbox(h.ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	plant("uid-a", "../victim", "p", "", false)
	plant("uid-b", "a", "b/c", "", false)
	plant("uid-c", "ns", "p", filepath.Join(root, "elsewhere"), true)
	plant("uid-d", "link", "p", filepath.Join(logs, "link_p_uid-d"), true)

	gone := func(types.UID) bool { return true }
	if err := h.rt.GarbageCollect(h.ctx, runtime.GCPolicy{MaxPerPodContainer: 0, MaxContainers: 0}, gone); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dirVictim, nested, logVictim} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("GC removed %s, which is no log of the pod it removed: %v", p, err)
		}
	}
	if list, _ := h.fake.ListPodSandbox(h.ctx, nil); len(list) != 0 {
		t.Errorf("%d sandboxes left, want all removed from the runtime", len(list))
	}
	if l := lines.with("outside the pod logs directory"); len(l) < 3 {
		t.Errorf("log lines %q, want one per path left alone", l)
	}
}
