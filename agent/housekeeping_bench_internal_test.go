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

// runStaticAgent runs, until the test ends, an agent on an in-process
// fakecri whose file source holds a one-container pod of each name, with
// housekeeping left to the caller (every hour). fast makes the PLEG
// relist and the source rescan every few milliseconds. It returns the
// manifest directory.
func runStaticAgent(tb testing.TB, names []string, fast bool) (a *Agent, fake *fakecri.Runtime, manifests string, ctx context.Context) {
	tb.Helper()
	dir := tb.TempDir()
	manifests = filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, name := range names {
		doc := "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers: [{name: main, image: \"busybox:1.36\"}]\n"
		if err := os.WriteFile(filepath.Join(manifests, name+".yaml"), []byte(doc), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.88.0.0/16"})
	if err != nil {
		tb.Fatal(err)
	}
	var period, relist time.Duration
	if fast {
		period, relist = 20*time.Millisecond, 10*time.Millisecond
	}
	src, err := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: "node", Period: period})
	if err != nil {
		tb.Fatal(err)
	}
	a, err = New(Config{NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{src},
		RelistPeriod: relist, HousekeepingPeriod: time.Hour,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"}})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
	return a, fake, manifests, ctx
}

// running counts the agent's pods in phase Running.
func running(a *Agent) int {
	n := 0
	for _, p := range a.Pods() {
		if p.Status.Phase == v1.PodRunning {
			n++
		}
	}
	return n
}

// BenchmarkHousekeeping100 measures one housekeeping pass (the sync
// loop's every 2 s) of an agent whose 100 static pods all run and nothing
// changes: what an idle node pays every two seconds.
func BenchmarkHousekeeping100(b *testing.B) {
	const n = 100
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("pod-%03d", i)
	}
	a, _, _, ctx := runStaticAgent(b, names, false)
	for deadline := time.Now().Add(time.Minute); running(a) != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d pods Running after a minute", running(a), n)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := a.HandlePodCleanups(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
