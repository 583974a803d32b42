package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
	"github.com/nodekit/nodekit/status"
)

const probedPod = `apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  containers:
  - name: app
    image: busybox:1.36
    env: [{name: FAKECRI_EXEC, value: '{"check-ready": {"exitCode": 0}, "check-alive": {"exitCode": 0}}'}]
    readinessProbe: {exec: {command: [check-ready]}, periodSeconds: 1, failureThreshold: 1}
    livenessProbe: {exec: {command: [check-alive]}, periodSeconds: 1, failureThreshold: 2}
`

type eventLog struct {
	mu   sync.Mutex
	list []string
}

func (e *eventLog) add(_ *v1.Pod, _, reason, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, reason+": "+msg)
}

func (e *eventLog) has(s string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range e.list {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// TestExecProbesOnFakecri drives readiness and liveness through scripted
// exec results: readiness flips the Ready condition both ways, and a
// failing liveness probe restarts the container.
func TestExecProbesOnFakecri(t *testing.T) {
	dir := manifestDir(t)
	if err := os.WriteFile(filepath.Join(dir, "probed.yaml"), []byte(probedPod), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := newFake(t)
	src, _ := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "node"})
	var events eventLog
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{src}, Events: events.add,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "..", "logs"), PodsDir: filepath.Join(dir, "..", "pods"), ResolvConf: "-"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	r := &running{t: t, a: a}

	ready := func() (bool, *v1.ContainerStatus) {
		p := r.pod("probed")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady {
				return c.Status == v1.ConditionTrue, &p.Status.ContainerStatuses[0]
			}
		}
		return false, &p.Status.ContainerStatuses[0]
	}
	eventually(t, "the pod is Ready", func() bool { ok, _ := ready(); return ok })
	_, cs := ready()
	id := strings.TrimPrefix(cs.ContainerID, "fakecri://")

	if err := fake.SetExecResult(id, "check-ready", fakecri.ExecResult{ExitCode: 1, Stderr: "not yet"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod is not Ready", func() bool { ok, c := ready(); return !ok && c != nil && !c.Ready })
	if !events.has("Readiness probe failed: not yet") {
		t.Error("no Unhealthy event for the readiness failure")
	}
	if err := fake.SetExecResult(id, "check-ready", fakecri.ExecResult{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod is Ready again", func() bool { ok, _ := ready(); return ok })

	if err := fake.SetExecResult(id, "check-alive", fakecri.ExecResult{ExitCode: 1, Stdout: "deadlocked"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the container is restarted", func() bool {
		_, c := ready()
		return c != nil && c.RestartCount >= 1 && c.ContainerID != "fakecri://"+id
	})
	for _, want := range []string{"Liveness probe failed: deadlocked", "failed liveness probe, will be restarted"} {
		if !events.has(want) {
			t.Errorf("no event with %q", want)
		}
	}
}

// TestReadinessProbedWhileThePodTerminates removes the manifest of a Ready
// pod whose container takes 3 s to stop: as in the kubelet, its readiness
// probe goes on through the grace period, so a failing probe turns the
// terminating pod NotReady before its container is gone, and no liveness
// restart happens meanwhile.
func TestReadinessProbedWhileThePodTerminates(t *testing.T) {
	dir := manifestDir(t)
	slow := strings.Replace(probedPod, `env: [`, `env: [{name: FAKECRI_STOP_DELAY, value: "3s"}, `, 1)
	if err := os.WriteFile(filepath.Join(dir, "probed.yaml"), []byte(slow), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &stopRecorder{Runtime: newFake(t), stops: map[string][]int64{}}
	fake := rec.Runtime
	// /pods no longer lists a pod whose manifest is gone, as the kubelet's;
	// the status sink sees it until it is terminated.
	var (
		mu     sync.Mutex
		latest v1.PodStatus
	)
	sink := status.SinkFunc(func(_ context.Context, _ *v1.Pod, st v1.PodStatus) error {
		mu.Lock()
		defer mu.Unlock()
		latest = st
		return nil
	})
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "node", Period: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName: "node", RuntimeService: rec, ImageService: rec, Sources: []podsource.Source{src}, StatusSink: sink,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "..", "logs"), PodsDir: filepath.Join(dir, "..", "pods"), ResolvConf: "-"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ready := func() (ok bool, cs *v1.ContainerStatus) {
		mu.Lock()
		defer mu.Unlock()
		if len(latest.ContainerStatuses) != 1 {
			return false, nil
		}
		for _, c := range latest.Conditions {
			if c.Type == v1.PodReady {
				ok = c.Status == v1.ConditionTrue
			}
		}
		c := latest.ContainerStatuses[0]
		return ok, &c
	}
	eventually(t, "the pod is Ready", func() bool { ok, _ := ready(); return ok })
	_, cs := ready()
	id := strings.TrimPrefix(cs.ContainerID, "fakecri://")
	if err := os.Remove(filepath.Join(dir, "probed.yaml")); err != nil {
		t.Fatal(err)
	}
	// The kill has begun; the container takes 3 s to stop.
	eventually(t, "the container is being stopped", func() bool { return len(rec.stopsOf("app")) > 0 })
	if err := fake.SetExecResult(id, "check-ready", fakecri.ExecResult{ExitCode: 1, Stderr: "draining"}); err != nil {
		t.Fatal(err)
	}
	if err := fake.SetExecResult(id, "check-alive", fakecri.ExecResult{ExitCode: 1, Stderr: "stuck"}); err != nil {
		t.Fatal(err)
	}
	eventuallyShowing(t, "the terminating pod turns NotReady while its container still runs", func() bool {
		ok, c := ready()
		return c != nil && !ok && !c.Ready && c.State.Running != nil
	}, func() string { ok, c := ready(); return fmt.Sprintf("ready %v, container %+v", ok, c) })
	eventually(t, "the pod's container has stopped", func() bool { _, c := ready(); return c != nil && c.State.Terminated != nil })
	list, err := fake.ListContainers(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.GetMetadata().GetAttempt() != 0 {
			t.Errorf("container %s attempt %d: restarted while its pod terminated", c.GetMetadata().GetName(), c.GetMetadata().GetAttempt())
		}
	}
}
