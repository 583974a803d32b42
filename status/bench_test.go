package status_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// webPod returns a running web pod with an init container and a sidecar,
// and what the runtime shows of it: its app restarted once.
func webPod() (*v1.Pod, *runtime.PodStatus) {
	always := v1.ContainerRestartPolicyAlways
	web := pod(v1.RestartPolicyAlways, []string{"setup", "proxy"}, "app", "metrics", "probed")
	web.Spec.InitContainers[1].RestartPolicy = &always
	obs := observed(
		c("probed", running, 0, 0), c("metrics", running, 0, 0),
		c("app", running, 0, 1), c("app", exited, 137, 0),
		c("proxy", running, 0, 0), c("setup", exited, 0, 0),
	)
	// Runtimes report times in nanoseconds, which a recorded status
	// keeps in whole seconds.
	for i, cs := range obs.ContainerStatuses {
		cs.StartedAt = cs.StartedAt.Add(time.Duration(i+1) * 123456789)
		cs.FinishedAt = cs.FinishedAt.Add(time.Duration(i+1) * 234567891)
	}
	return web, obs
}

// BenchmarkGenerate measures one status generation for pods of the usual
// shapes: a running web pod with an init container and a sidecar, a
// crash-looping pod, and a finished job.
func BenchmarkGenerate(b *testing.B) {
	web, webObs := webPod()
	web.Spec.Containers[2].ReadinessProbe = &v1.Probe{}
	crasher := pod(v1.RestartPolicyAlways, nil, "crasher")
	crashObs := observed(c("crasher", exited, 1, 4), c("crasher", exited, 1, 3))
	job := pod(v1.RestartPolicyNever, nil, "work")
	jobObs := &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{c("work", exited, 0, 0)}}

	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		obs     *runtime.PodStatus
		waiting map[string]status.Reason
		ready   map[string]bool
	}{
		{"web", web, webObs, nil, map[string]bool{"fake://probed-0": true}},
		{"crashloop", crasher, crashObs, map[string]status.Reason{"crasher": {Reason: "CrashLoopBackOff", Message: "back-off 40s"}}, nil},
		{"job", job, jobObs, nil, nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			in := status.Input{Pod: tc.pod, Runtime: tc.obs, Waiting: tc.waiting, Ready: tc.ready, NodeIPs: []string{"127.0.0.1"}, Now: now}
			prev := status.Generate(in)
			in.Previous = &prev
			b.ReportAllocs()
			for b.Loop() {
				_ = status.Generate(in)
			}
		})
	}
}

// BenchmarkSetPodStatusUnchanged measures what a resync of an unchanged
// pod costs the Manager: a status equal to the one it holds.
func BenchmarkSetPodStatusUnchanged(b *testing.B) {
	web, obs := webPod()
	in := status.Input{Pod: web, Runtime: obs, NodeIPs: []string{"127.0.0.1"}, Now: now}
	prev := status.Generate(in)
	in.Previous = &prev
	next := status.Generate(in)
	m := status.New(status.Config{})
	m.SetPodStatus(web, prev)
	b.ReportAllocs()
	for b.Loop() {
		m.SetPodStatus(web, next)
	}
	if v := m.Version(web.UID); v != 1 {
		b.Fatalf("version %d, want 1: the statuses differ", v)
	}
}
