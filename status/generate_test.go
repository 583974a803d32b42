package status_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// sidecarPod is a pod with one sidecar "proxy", behind a startup probe,
// and the given regular containers.
func sidecarPod(policy v1.RestartPolicy, containers ...string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	p := pod(policy, []string{"proxy"}, containers...)
	p.Spec.InitContainers[0].RestartPolicy = &always
	p.Spec.InitContainers[0].StartupProbe = &v1.Probe{}
	return p
}

func TestPhaseWithSidecars(t *testing.T) {
	always, never := v1.RestartPolicyAlways, v1.RestartPolicyNever
	proxy := c("proxy", running, 0, 0)
	started := map[string]bool{proxy.ID.String(): true}
	crashed := c("proxy", exited, 1, 2)
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		obs     *runtime.PodStatus
		started map[string]bool
		waiting map[string]status.Reason
		want    v1.PodPhase
	}{
		{"sidecar not started, app not created", sidecarPod(always, "app"), observed(proxy), nil, nil, v1.PodPending},
		{"sidecar never ran, app not created", sidecarPod(always, "app"), observed(), nil, nil, v1.PodPending},
		{"app running, sidecar restarted and not started yet", sidecarPod(always, "app"), observed(c("app", running, 0, 0), c("proxy", running, 0, 1)), nil, nil, v1.PodRunning},
		{"app running, sidecar crash looping", sidecarPod(always, "app"), observed(c("app", running, 0, 0), crashed), nil,
			map[string]status.Reason{"proxy": {Reason: "CrashLoopBackOff"}}, v1.PodRunning},
		{"app running, sidecar stopped", sidecarPod(always, "app"), observed(c("app", running, 0, 0), crashed), nil, nil, v1.PodRunning},
		{"Never, app succeeded, sidecar still running", sidecarPod(never, "app"), observed(c("app", exited, 0, 0), proxy), started, nil, v1.PodRunning},
		{"Never, app failed, sidecar still running", sidecarPod(never, "app"), observed(c("app", exited, 1, 0), proxy), started, nil, v1.PodRunning},
		{"Never, app succeeded, sidecar stopped", sidecarPod(never, "app"), observed(c("app", exited, 0, 0), c("proxy", exited, 137, 0)), started, nil, v1.PodSucceeded},
		{"Never, app failed, sidecar stopped", sidecarPod(never, "app"), observed(c("app", exited, 1, 0), c("proxy", exited, 0, 0)), started, nil, v1.PodFailed},
		{"sidecar stopped, app not created", sidecarPod(always, "app"), observed(crashed), nil, nil, v1.PodPending},
		// Started in an older sandbox: the pod initializes again.
		{"new sandbox, old app, sidecar not started", sidecarPod(always, "app"), func() *runtime.PodStatus {
			o := observed(c("proxy", running, 0, 1), c("app", exited, 137, 0))
			o.ContainerStatuses[0].SandboxID = "sb"
			o.ContainerStatuses[1].SandboxID = "old"
			return o
		}(), nil, nil, v1.PodPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.Generate(status.Input{Pod: tc.pod, Runtime: tc.obs, Started: tc.started, Waiting: tc.waiting, Now: now})
			if s.Phase != tc.want {
				t.Errorf("phase %s, want %s", s.Phase, tc.want)
			}
		})
	}
}
