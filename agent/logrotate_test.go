package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
)

// A running container's log bigger than ContainerLogMaxSize is rotated
// after 10 s of the agent's clock: the runtime writes to a new file and
// the old content moves to the timestamped one.
func TestAgentRotatesContainerLogs(t *testing.T) {
	fake := newFake(t)
	dir := manifestDir(t)
	writeManifest(t, dir, "web", "Always", "FAKECRI_LOG", "hello\nworld")
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "node", Period: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	logs := filepath.Join(dir, "..", "logs")
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{src},
		Clock: clk, ContainerLogMaxSize: 10,
		CRI: cri.Config{PodLogsDir: logs, PodsDir: filepath.Join(dir, "..", "pods"), ResolvConf: "-"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	running := func() bool {
		for _, p := range a.Pods() {
			if p.Name == "web-node" && p.Status.Phase == v1.PodRunning {
				return true
			}
		}
		return false
	}
	// The fake clock drives relists and syncs too.
	eventually(t, "web runs", func() bool {
		clk.Step(20 * time.Millisecond)
		return running()
	})
	live, _ := filepath.Glob(filepath.Join(logs, "*", "main", "0.log"))
	if len(live) != 1 {
		t.Fatalf("container logs %v, want one", live)
	}
	rotatedGlob := live[0] + ".*"
	eventually(t, "the log is rotated", func() bool {
		clk.Step(time.Second)
		got, _ := filepath.Glob(rotatedGlob)
		return len(got) == 1
	})
	got, _ := filepath.Glob(rotatedGlob)
	if b, err := os.ReadFile(got[0]); err != nil || len(b) < 10 {
		t.Errorf("rotated log %s holds %q (%v), want the old content", got[0], b, err)
	}
	if b, err := os.ReadFile(live[0]); err != nil || len(b) != 0 {
		t.Errorf("live log after rotation holds %q (%v), want a new empty file", b, err)
	}
}

// A negative ContainerLogMaxSize turns rotation off; MaxFiles below 2, a
// negative MaxWorkers or MonitorInterval are refused, naming the field.
func TestAgentContainerLogConfig(t *testing.T) {
	fake := newFake(t)
	src, err := podsource.NewFile(podsource.FileConfig{Dir: manifestDir(t), NodeName: "node"})
	if err != nil {
		t.Fatal(err)
	}
	for field, cfg := range map[string]agent.Config{
		"ContainerLogMaxFiles":        {ContainerLogMaxFiles: 1},
		"ContainerLogMaxWorkers":      {ContainerLogMaxWorkers: -1},
		"ContainerLogMonitorInterval": {ContainerLogMonitorInterval: -time.Second},
	} {
		cfg.NodeName, cfg.RuntimeService, cfg.ImageService, cfg.Sources = "node", fake, fake, []podsource.Source{src}
		if _, err := agent.New(cfg); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("agent.New with a bad %s: %v, want an error naming it", field, err)
		}
	}
}
