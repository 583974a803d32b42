package agent_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/images"
)

// fullImageFs is an image filesystem at 90%.
type fullImageFs struct{}

func (fullImageFs) Summary(context.Context) (*statsapi.Summary, error) {
	u := func(v uint64) *uint64 { return &v }
	return &statsapi.Summary{Node: statsapi.NodeStats{Runtime: &statsapi.RuntimeStats{
		ImageFs: &statsapi.FsStats{CapacityBytes: u(1 << 30), AvailableBytes: u(100 << 20)},
	}}}, nil
}

// With Config.ImageGC, an image no container uses is removed once the
// image filesystem is over its high threshold; the image of a running pod
// stays.
func TestImageGCRemovesUnusedImagesThroughTheAgent(t *testing.T) {
	fake := newFake(t)
	dir := t.TempDir()
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	ctx := context.Background()
	if _, err := fake.PullImage(ctx, &runtimeapi.ImageSpec{Image: "example.com/unused:1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI:     cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Server:  agent.ServerConfig{Stats: fullImageFs{}},
		ImageGC: &images.GCConfig{MinAge: time.Nanosecond, Period: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	f.send(podsource.SET)
	f.send(podsource.ADD, apiPod("web", v1.RestartPolicyAlways, []string{"main"}))
	f.waitFor("web", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	has := func(name string) bool {
		st, err := fake.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: name}, false)
		return err == nil && st.Image != nil
	}
	eventually(t, "the unused image removed", func() bool { return !has("example.com/unused:1") })
	if !has("busybox:1.36") {
		t.Errorf("the running pod's image was removed")
	}
}
