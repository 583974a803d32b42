package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// BenchmarkHousekeeping100 measures one housekeeping pass (the sync
// loop's every 2 s) of an agent whose 100 static pods all run and nothing
// changes: what an idle node pays every two seconds.
func BenchmarkHousekeeping100(b *testing.B) {
	dir := b.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		b.Fatal(err)
	}
	const n = 100
	for i := range n {
		doc := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: pod-%03d}\nspec:\n  containers: [{name: main, image: \"busybox:1.36\"}]\n", i)
		if err := os.WriteFile(filepath.Join(manifests, fmt.Sprintf("pod-%03d.yaml", i)), []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.88.0.0/16"})
	if err != nil {
		b.Fatal(err)
	}
	src, err := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: "node"})
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(Config{NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{src},
		HousekeepingPeriod: time.Hour,
		CRI:                cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		running := 0
		for _, p := range a.Pods() {
			if p.Status.Phase == v1.PodRunning {
				running++
			}
		}
		if running == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d pods Running after a minute", running, n)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := a.HandlePodCleanups(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
