package eviction_test

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/eviction"
)

func TestRank(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	stats := map[string]statsapi.PodStats{
		"over-small":  {Memory: &statsapi.MemoryStats{WorkingSetBytes: u(150 * mi)}, EphemeralStorage: &statsapi.FsStats{UsedBytes: u(20 * mi)}, ProcessStats: &statsapi.ProcessStats{ProcessCount: u(5)}},
		"over-big":    {Memory: &statsapi.MemoryStats{WorkingSetBytes: u(500 * mi)}, EphemeralStorage: &statsapi.FsStats{UsedBytes: u(90 * mi)}, ProcessStats: &statsapi.ProcessStats{ProcessCount: u(50)}},
		"within":      {Memory: &statsapi.MemoryStats{WorkingSetBytes: u(900 * mi)}, EphemeralStorage: &statsapi.FsStats{UsedBytes: u(1 * mi)}, ProcessStats: &statsapi.ProcessStats{ProcessCount: u(500)}},
		"over-urgent": {Memory: &statsapi.MemoryStats{WorkingSetBytes: u(900 * mi)}, EphemeralStorage: &statsapi.FsStats{UsedBytes: u(900 * mi)}, ProcessStats: &statsapi.ProcessStats{ProcessCount: u(900)}},
	}
	pods := func() []*v1.Pod {
		within := mkPod("within", "1Gi", 0)
		return []*v1.Pod{
			mkPod("over-urgent", "", 100), within, mkPod("over-small", "100Mi", 0), mkPod("no-stats", "", 1000), mkPod("over-big", "100Mi", 0),
		}
	}
	lookup := func(p *v1.Pod) (statsapi.PodStats, bool) {
		s, ok := stats[p.Name]
		return s, ok
	}
	for _, tc := range []struct {
		res  v1.ResourceName
		want string
	}{
		// No stats first; then over request; then lower priority; then
		// most above request.
		{v1.ResourceMemory, "no-stats over-big over-small over-urgent within"},
		// No ephemeral-storage requests: every pod with stats exceeds
		// them, so priority, then usage, decides.
		{v1.ResourceEphemeralStorage, "no-stats over-big over-small within over-urgent"},
		// PIDs: by priority, then processes.
		{"pids", "within over-big over-small over-urgent no-stats"},
	} {
		ps := pods()
		eviction.Rank(ps, tc.res, lookup)
		var got []string
		for _, p := range ps {
			got = append(got, p.Name)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("Rank(%s) = %v, want %s", tc.res, got, tc.want)
		}
	}
}
