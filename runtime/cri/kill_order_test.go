package cri_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime/fakecri"
)

// waitUntil polls cond for up to 10 s of wall time, failing with
// describe() when it never holds.
func waitUntil(t *testing.T, what string, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s\n%s", what, describe())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKillPodSidecarsGetTheGraceThatRemains checks the sidecar stop
// ordering of the kubelet: every container's termination starts at once,
// a sidecar waits for the regular containers and for the sidecars after
// it to exit, within its grace period, and is then stopped with what is
// left of that period (whole seconds, at least 2).
func TestKillPodSidecarsGetTheGraceThatRemains(t *testing.T) {
	for _, tc := range []struct {
		name string
		// env scripts each container; the pod's grace period is 10 s.
		env map[string][]string
		// steps are the fake-clock steps, each taken once the stops
		// named in wantAfter[i] have been made and the clock has
		// waiters[i] timers: the stops under way and the sidecars
		// waiting for their turn.
		steps     []time.Duration
		wantAfter [][]string
		waiters   []int
		want      map[string]int64
	}{
		{
			name: "regular containers exit within the grace period",
			env: map[string][]string{
				"app":    {fakecri.EnvStopDelay, "3s"},
				"logger": {fakecri.EnvStopDelay, "2s"},
			},
			// app and worker are stopped at once; at 3 s app exits and
			// logger is stopped with 7 s left; at 5 s logger exits and
			// proxy is stopped with 5 s left.
			steps:     []time.Duration{3 * time.Second, 2 * time.Second},
			wantAfter: [][]string{{"app", "worker"}, {"app", "worker", "logger"}},
			waiters:   []int{4, 3},
			want:      map[string]int64{"app": 10, "worker": 10, "logger": 7, "proxy": 5},
		},
		{
			name: "a regular container uses up the grace period",
			env: map[string][]string{
				"app": {fakecri.EnvIgnoreSIGTERM, "true"},
			},
			// The sidecars wait the whole 10 s, then get the 2 s minimum.
			steps:     []time.Duration{10 * time.Second},
			wantAfter: [][]string{{"app", "worker"}},
			waiters:   []int{3},
			want:      map[string]int64{"app": 10, "worker": 10, "logger": 2, "proxy": 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fakecri.Config{})
			pod := testPod(v1.RestartPolicyAlways, []string{"proxy", "logger"}, "app", "worker")
			pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
			always := v1.ContainerRestartPolicyAlways
			for i := range pod.Spec.InitContainers {
				pod.Spec.InitContainers[i].RestartPolicy = &always
			}
			for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
				for i := range cs {
					withEnv(&cs[i], tc.env[cs[i].Name]...)
				}
			}
			for i := 0; i < 4; i++ {
				h.sync(pod)
			}
			st := h.status(pod)
			ids := map[string]string{}
			for _, c := range st.ContainerStatuses {
				ids[c.Name] = c.ID.ID
			}
			if len(ids) != 4 {
				t.Fatalf("containers %v, want all four running", states(st))
			}
			stops := func() map[string]int64 {
				h.rec.mu.Lock()
				defer h.rec.mu.Unlock()
				out := map[string]int64{}
				for name, id := range ids {
					if g, ok := h.rec.stops[id]; ok {
						out[name] = g
					}
				}
				return out
			}
			describe := func() string { return fmt.Sprintf("stops so far: %v; clock waiters: %d", stops(), h.clock.Waiters()) }

			done := make(chan error, 1)
			go func() { done <- h.rt.KillPod(h.ctx, pod, nil, nil) }()
			finished := false
			t.Cleanup(func() {
				// On a failure, let the kill run to its end.
				for !finished {
					select {
					case <-done:
						finished = true
					case <-time.After(time.Millisecond):
						h.clock.Step(time.Minute)
					}
				}
			})
			for i, step := range tc.steps {
				waitUntil(t, fmt.Sprintf("%v are stopped and the rest wait", tc.wantAfter[i]), func() bool {
					got := stops()
					for _, n := range tc.wantAfter[i] {
						if _, ok := got[n]; !ok {
							return false
						}
					}
					return len(got) == len(tc.wantAfter[i]) && h.clock.Waiters() == tc.waiters[i]
				}, describe)
				h.clock.Step(step)
			}
			err := <-done
			finished = true
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, stops()); diff != "" {
				t.Errorf("stop grace periods (-want +got):\n%s", diff)
			}
		})
	}
}
