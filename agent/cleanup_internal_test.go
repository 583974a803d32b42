package agent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// An agent that restarts finds its pods in the runtime before the sync
// loop has handled their ADD. Housekeeping in that window must not take
// them for orphans: here the loop does not run at all, so every ADD stays
// queued in the merger's channel.
func TestHousekeepingSparesPodsWhoseAddIsQueued(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: main, image: busybox:1.36}\n"
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.88.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	newAgent := func() *Agent {
		src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "node"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(Config{NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{src},
			RelistPeriod: 10 * time.Millisecond, HousekeepingPeriod: time.Hour,
			CRI: cri.Config{PodLogsDir: filepath.Join(dir, "..", "logs"), PodsDir: filepath.Join(dir, "..", "pods"), ResolvConf: "-"}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
		}
	}

	// A first agent starts the pod, then stops and leaves it running.
	first := newAgent()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	until("the pod runs", func() bool {
		pods := first.Pods()
		return len(pods) == 1 && pods[0].Status.Phase == v1.PodRunning
	})
	uid := first.Pods()[0].UID
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The second agent runs only its sources and its PLEG.
	a := newAgent()
	ctx, cancel = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{a.merger.Run, a.pleg.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	until("the source was read and the PLEG saw the pod", func() bool {
		_, cached := a.cache.Statuses()[uid]
		return a.merger.SeenAllSources() && cached
	})
	if err := a.HandlePodCleanups(ctx); err != nil {
		t.Fatal(err)
	}
	if a.workers.IsPodTerminationRequested(uid) {
		t.Fatal("housekeeping killed a pod whose ADD was still queued")
	}
}
