package critest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sandboxConfig returns a config for a fresh sandbox whose logs go to a
// temporary directory.
func (s *suite) sandboxConfig(t *testing.T, name string) *runtimeapi.PodSandboxConfig {
	t.Helper()
	suffix := randomSuffix()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      "critest-" + name + "-" + suffix,
			Namespace: "critest",
			Uid:       "critest-uid-" + suffix,
		},
		Hostname:     "critest",
		LogDirectory: t.TempDir(),
		Labels:       map[string]string{"critest": suffix},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: s.namespaces(),
		}},
	}
	return cfg
}

func (s *suite) namespaces() *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	if s.cfg.HostNetwork {
		o.Network = runtimeapi.NamespaceMode_NODE
	}
	return o
}

// runSandbox runs a sandbox and removes it when the test ends.
func (s *suite) runSandbox(t *testing.T, cfg *runtimeapi.PodSandboxConfig) string {
	t.Helper()
	id, err := s.cfg.Runtime.RunPodSandbox(s.ctx(t), cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
		defer cancel()
		_ = s.cfg.Runtime.StopPodSandbox(ctx, id)
		if err := s.cfg.Runtime.RemovePodSandbox(ctx, id); err != nil {
			t.Errorf("cleanup: RemovePodSandbox(%s): %v", id, err)
		}
	})
	return id
}

func (s *suite) sandbox(t *testing.T, name string) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	cfg := s.sandboxConfig(t, name)
	return s.runSandbox(t, cfg), cfg
}

// containerSpec is a container scripted for a real runtime (shell, run
// by busybox sh) and for fakecri (env).
type containerSpec struct {
	name  string
	shell string
	env   map[string]string
}

// longRunning is a container that runs until stopped and exits 0 on
// SIGTERM; exec scripts fakecri's ExecSync results.
func (s *suite) longRunning(name, exec string) containerSpec {
	spec := containerSpec{
		name:  name,
		shell: "trap 'exit 0' TERM; while true; do sleep 1; done",
		env:   map[string]string{"FAKECRI_TERM_EXIT_CODE": "0"},
	}
	if exec != "" {
		spec.env["FAKECRI_EXEC"] = exec
	}
	return spec
}

func (s *suite) containerConfig(sb *runtimeapi.PodSandboxConfig, spec containerSpec) *runtimeapi.ContainerConfig {
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: spec.name},
		Image:    &runtimeapi.ImageSpec{Image: s.cfg.Image},
		Command:  []string{"sh", "-c", spec.shell},
		LogPath:  spec.name + "/0.log",
		Labels:   map[string]string{"critest": sb.GetLabels()["critest"]},
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: s.namespaces(),
		}},
	}
	for k, v := range spec.env {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(v)})
	}
	return cfg
}

func (s *suite) createContainer(t *testing.T, sb string, sbCfg *runtimeapi.PodSandboxConfig, spec containerSpec) string {
	t.Helper()
	id, err := s.cfg.Runtime.CreateContainer(s.ctx(t), sb, s.containerConfig(sbCfg, spec), sbCfg)
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", spec.name, err)
	}
	return id
}

func (s *suite) startContainer(t *testing.T, sb string, sbCfg *runtimeapi.PodSandboxConfig, spec containerSpec) string {
	t.Helper()
	id := s.createContainer(t, sb, sbCfg, spec)
	if err := s.cfg.Runtime.StartContainer(s.ctx(t), id); err != nil {
		t.Fatalf("StartContainer %s: %v", spec.name, err)
	}
	return id
}

// eventually checks cond until it holds, failing the test after the
// timeout. The first check is immediate, so a runtime that is already in
// the state (fakecri) never waits.
func (s *suite) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(s.cfg.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", s.cfg.Timeout, what)
		}
		time.Sleep(s.cfg.Poll)
	}
}

func (s *suite) containerStatus(t *testing.T, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := s.cfg.Runtime.ContainerStatus(s.ctx(t), id, false)
	if err != nil {
		t.Fatalf("ContainerStatus(%s): %v", id, err)
	}
	return resp.GetStatus()
}

func (s *suite) waitState(t *testing.T, id string, want runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	t.Helper()
	var st *runtimeapi.ContainerStatus
	s.eventually(t, "container is "+want.String(), func() bool {
		st = s.containerStatus(t, id)
		return st.GetState() == want
	})
	return st
}

func (s *suite) waitExited(t *testing.T, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	return s.waitState(t, id, runtimeapi.ContainerState_CONTAINER_EXITED)
}
