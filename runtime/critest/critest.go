package critest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// Config tells the suite what to test.
type Config struct {
	// Runtime and Images are the services under test. Required.
	Runtime criapi.RuntimeService
	Images  criapi.ImageManagerService
	// Image is a busybox image that is already present in the runtime.
	// Required.
	Image string
	// HostNetwork runs the suite's sandboxes on the host network; without
	// it they must get an IP from the runtime's pod network.
	HostNetwork bool
	// Timeout bounds every wait for a state change. Default 30s.
	Timeout time.Duration
	// Poll is the interval between two checks while waiting. Default
	// 100ms.
	Poll time.Duration
}

// Run runs the whole suite as subtests of t. Each subtest removes the
// sandboxes it created.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.Runtime == nil || cfg.Images == nil || cfg.Image == "" {
		t.Fatal("critest: Config.Runtime, Config.Images and Config.Image are required")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Poll == 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	s := &suite{cfg: cfg}
	for _, c := range s.checks() {
		t.Run(c.name, c.run)
	}
}

type check struct {
	name string
	run  func(*testing.T)
}

func (s *suite) checks() []check {
	return []check{
		{"Version", s.version},
		{"Status", s.status},
		{"Image", s.image},
		{"SandboxLifecycle", s.sandboxLifecycle},
		{"ContainerExitCodeAndReason", s.containerExit},
		{"ContainerLogs", s.containerLogs},
		{"ExecSync", s.execSync},
		{"StopContainerIsIdempotent", s.stopIdempotent},
		{"StopContainerKillsAfterTimeout", s.stopKillsAfterTimeout},
		{"RemoveSandboxRemovesContainers", s.removeSandbox},
		{"ContainerStats", s.stats},
		{"ErrorCodes", s.errorCodes},
	}
}

// Checks returns the names of the suite's checks, in the order Run runs
// them; each is a subtest name, for go test -run.
func Checks() []string {
	var names []string
	for _, c := range (&suite{}).checks() {
		names = append(names, c.name)
	}
	return names
}

type suite struct {
	cfg Config
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*s.cfg.Timeout)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) version(t *testing.T) {
	v, err := s.cfg.Runtime.Version(s.ctx(t), "v1")
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if v.GetRuntimeName() == "" || v.GetRuntimeVersion() == "" {
		t.Errorf("Version: runtime name %q, version %q: want both set", v.GetRuntimeName(), v.GetRuntimeVersion())
	}
	if v.GetRuntimeApiVersion() != "v1" {
		t.Errorf("Version: runtime API version %q, want v1", v.GetRuntimeApiVersion())
	}
}

func (s *suite) status(t *testing.T) {
	st, err := s.cfg.Runtime.Status(s.ctx(t), false)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	found := false
	for _, c := range st.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady {
			found = true
			if !c.GetStatus() {
				t.Errorf("RuntimeReady is false: %s: %s", c.GetReason(), c.GetMessage())
			}
		}
	}
	if !found {
		t.Error("Status has no RuntimeReady condition")
	}
}

func (s *suite) image(t *testing.T) {
	ctx := s.ctx(t)
	st, err := s.cfg.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: s.cfg.Image}, false)
	if err != nil {
		t.Fatalf("ImageStatus(%q): %v", s.cfg.Image, err)
	}
	img := st.GetImage()
	if img == nil {
		t.Fatalf("ImageStatus(%q): image not present", s.cfg.Image)
	}
	if img.GetId() == "" || img.GetSize() == 0 {
		t.Errorf("ImageStatus(%q): id %q size %d: want both set", s.cfg.Image, img.GetId(), img.GetSize())
	}
	list, err := s.cfg.Images.ListImages(ctx, nil)
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	listed := false
	for _, i := range list {
		listed = listed || i.GetId() == img.GetId()
	}
	if !listed {
		t.Errorf("ListImages does not list %s", img.GetId())
	}
	missing, err := s.cfg.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "nodekit.invalid/critest/absent:" + randomSuffix()}, false)
	if err != nil {
		t.Fatalf("ImageStatus of an absent image: %v, want no error", err)
	}
	if missing.GetImage() != nil {
		t.Errorf("ImageStatus of an absent image returned %v, want nil", missing.GetImage())
	}
}

func (s *suite) sandboxLifecycle(t *testing.T) {
	ctx := s.ctx(t)
	cfg := s.sandboxConfig(t, "lifecycle")
	id := s.runSandbox(t, cfg)
	resp, err := s.cfg.Runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	st := resp.GetStatus()
	if st.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("state %v, want SANDBOX_READY", st.GetState())
	}
	if m := st.GetMetadata(); m.GetName() != cfg.Metadata.Name || m.GetUid() != cfg.Metadata.Uid || m.GetNamespace() != cfg.Metadata.Namespace {
		t.Errorf("metadata %v, want %v", m, cfg.Metadata)
	}
	if st.GetLabels()["critest"] != cfg.Labels["critest"] {
		t.Errorf("labels %v, want to include %v", st.GetLabels(), cfg.Labels)
	}
	if st.GetCreatedAt() == 0 {
		t.Error("createdAt is not set")
	}
	if !s.cfg.HostNetwork && st.GetNetwork().GetIp() == "" {
		t.Error("a pod-network sandbox has no IP")
	}
	list, err := s.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"critest": cfg.Labels["critest"]}})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	if len(list) != 1 || list[0].GetId() != id {
		t.Errorf("ListPodSandbox by label = %d sandboxes, want just %s", len(list), id)
	}
	for i := 0; i < 2; i++ {
		if err := s.cfg.Runtime.StopPodSandbox(ctx, id); err != nil {
			t.Fatalf("StopPodSandbox #%d: %v", i+1, err)
		}
	}
	resp, err = s.cfg.Runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus after stop: %v", err)
	}
	if resp.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("state after stop %v, want SANDBOX_NOTREADY", resp.GetStatus().GetState())
	}
	for i := 0; i < 2; i++ {
		if err := s.cfg.Runtime.RemovePodSandbox(ctx, id); err != nil {
			t.Fatalf("RemovePodSandbox #%d: %v", i+1, err)
		}
	}
	if _, err := s.cfg.Runtime.PodSandboxStatus(ctx, id, false); status.Code(err) != codes.NotFound {
		t.Errorf("PodSandboxStatus after remove: %v, want NotFound", err)
	}
}

func (s *suite) containerExit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int32
		reason string
	}{
		{"exit-0", 0, "Completed"},
		{"exit-3", 3, "Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, sbCfg := s.sandbox(t, tc.name)
			before := time.Now().Add(-time.Second)
			id := s.startContainer(t, sb, sbCfg, containerSpec{
				name:  "exits",
				shell: fmt.Sprintf("exit %d", tc.code),
				env:   map[string]string{"FAKECRI_EXIT_CODE": fmt.Sprint(tc.code)},
			})
			st := s.waitExited(t, id)
			if st.GetExitCode() != tc.code {
				t.Errorf("exit code %d, want %d", st.GetExitCode(), tc.code)
			}
			if st.GetReason() != tc.reason {
				t.Errorf("reason %q, want %q", st.GetReason(), tc.reason)
			}
			created, started, finished := time.Unix(0, st.GetCreatedAt()), time.Unix(0, st.GetStartedAt()), time.Unix(0, st.GetFinishedAt())
			// containerd stamps the start when the start call returns, so a
			// process that exits at once can finish a few milliseconds
			// "before" it started; finish is only required not to precede
			// the creation, nor the start by more than a second.
			if created.Before(before) || started.Before(created) || finished.Before(created) || finished.Before(started.Add(-time.Second)) {
				t.Errorf("timestamps created %v started %v finished %v: want created ≤ started, created ≤ finished, finished no earlier than a second before started, after %v", created, started, finished, before)
			}
			if st.GetMetadata().GetName() != "exits" {
				t.Errorf("metadata name %q, want exits", st.GetMetadata().GetName())
			}
		})
	}
}

// criLogLine is the CRI log format: timestamp, stream, tag, content.
var criLogLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d) (stdout|stderr) (F|P) (.*)$`)

func (s *suite) containerLogs(t *testing.T) {
	sb, sbCfg := s.sandbox(t, "logs")
	id := s.startContainer(t, sb, sbCfg, containerSpec{
		name:  "logger",
		shell: "echo critest-line-1; echo critest-line-2",
		env:   map[string]string{"FAKECRI_LOG": "critest-line-1\ncritest-line-2", "FAKECRI_EXIT_CODE": "0"},
	})
	st := s.waitExited(t, id)
	path := filepath.Join(sbCfg.GetLogDirectory(), "logger", "0.log")
	if st.GetLogPath() != path {
		t.Errorf("status log path %q, want %q", st.GetLogPath(), path)
	}
	var data []byte
	s.eventually(t, "log file has both lines", func() bool {
		data, _ = os.ReadFile(path)
		return strings.Count(string(data), "critest-line-") == 2
	})
	var content []string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		m := criLogLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("log line %q is not in the CRI log format", line)
			continue
		}
		if m[3] != "stdout" || m[4] != "F" {
			t.Errorf("log line %q: want a full stdout line", line)
		}
		content = append(content, m[5])
	}
	if got := strings.Join(content, "|"); got != "critest-line-1|critest-line-2" {
		t.Errorf("log content %q, want critest-line-1|critest-line-2", got)
	}
}

func (s *suite) execSync(t *testing.T) {
	sb, sbCfg := s.sandbox(t, "exec")
	id := s.startContainer(t, sb, sbCfg, s.longRunning("exec",
		`{"sh -c echo critest-out; echo critest-err >&2; exit 7": {"exitCode": 7, "stdout": "critest-out\n", "stderr": "critest-err\n"}}`))
	s.waitState(t, id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	ctx := s.ctx(t)

	stdout, stderr, err := s.cfg.Runtime.ExecSync(ctx, id, []string{"echo", "hello", "exec"}, 10*time.Second)
	if err != nil {
		t.Fatalf("ExecSync echo: %v", err)
	}
	if string(stdout) != "hello exec\n" || len(stderr) != 0 {
		t.Errorf("ExecSync echo: stdout %q stderr %q, want %q and nothing", stdout, stderr, "hello exec\n")
	}

	stdout, stderr, err = s.cfg.Runtime.ExecSync(ctx, id, []string{"sh", "-c", "echo critest-out; echo critest-err >&2; exit 7"}, 10*time.Second)
	var exitErr utilexec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 7 {
		t.Fatalf("ExecSync exit 7: err %v, want an exit error with status 7", err)
	}
	if string(stdout) != "critest-out\n" || string(stderr) != "critest-err\n" {
		t.Errorf("ExecSync exit 7: stdout %q stderr %q", stdout, stderr)
	}
}

func (s *suite) stopIdempotent(t *testing.T) {
	sb, sbCfg := s.sandbox(t, "stop")
	id := s.startContainer(t, sb, sbCfg, s.longRunning("stopped", ""))
	s.waitState(t, id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	ctx := s.ctx(t)
	for i := 0; i < 2; i++ {
		if err := s.cfg.Runtime.StopContainer(ctx, id, 10); err != nil {
			t.Fatalf("StopContainer #%d: %v", i+1, err)
		}
	}
	st := s.waitExited(t, id)
	if st.GetExitCode() != 0 {
		t.Errorf("exit code after a SIGTERM it traps: %d, want 0", st.GetExitCode())
	}
	created := s.createContainer(t, sb, sbCfg, s.longRunning("never-started", ""))
	if err := s.cfg.Runtime.StopContainer(ctx, created, 10); err != nil {
		t.Errorf("StopContainer of a created container: %v", err)
	}
}

func (s *suite) stopKillsAfterTimeout(t *testing.T) {
	sb, sbCfg := s.sandbox(t, "kill")
	id := s.startContainer(t, sb, sbCfg, containerSpec{
		name:  "ignores-term",
		shell: "trap '' TERM; while true; do sleep 1; done",
		env:   map[string]string{"FAKECRI_IGNORE_SIGTERM": "true"},
	})
	s.waitState(t, id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := s.cfg.Runtime.StopContainer(s.ctx(t), id, 1); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	st := s.waitExited(t, id)
	if st.GetExitCode() != 137 {
		t.Errorf("exit code of a container killed after the timeout: %d, want 137", st.GetExitCode())
	}
}

func (s *suite) removeSandbox(t *testing.T) {
	ctx := s.ctx(t)
	sb, sbCfg := s.sandbox(t, "remove")
	a := s.startContainer(t, sb, sbCfg, s.longRunning("a", ""))
	b := s.createContainer(t, sb, sbCfg, s.longRunning("b", ""))
	if err := s.cfg.Runtime.StopPodSandbox(ctx, sb); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	st := s.waitExited(t, a)
	if st.GetFinishedAt() == 0 {
		t.Error("a container stopped with its sandbox has no finish time")
	}
	if err := s.cfg.Runtime.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	list, err := s.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	if len(list) != 0 {
		t.Errorf("ListContainers after removing the sandbox: %d containers, want 0", len(list))
	}
	for _, id := range []string{a, b} {
		if _, err := s.cfg.Runtime.ContainerStatus(ctx, id, false); status.Code(err) != codes.NotFound {
			t.Errorf("ContainerStatus(%s) after removing the sandbox: %v, want NotFound", id, err)
		}
	}
}

func (s *suite) stats(t *testing.T) {
	sb, sbCfg := s.sandbox(t, "stats")
	id := s.startContainer(t, sb, sbCfg, s.longRunning("measured", ""))
	s.waitState(t, id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	var found *runtimeapi.ContainerStats
	s.eventually(t, "stats list the container", func() bool {
		list, err := s.cfg.Runtime.ListContainerStats(s.ctx(t), &runtimeapi.ContainerStatsFilter{PodSandboxId: sb})
		if err != nil {
			t.Fatalf("ListContainerStats: %v", err)
		}
		for _, st := range list {
			if st.GetAttributes().GetId() == id {
				found = st
			}
		}
		return found != nil && found.GetCpu() != nil && found.GetMemory() != nil
	})
	if found.GetAttributes().GetMetadata().GetName() != "measured" {
		t.Errorf("stats metadata %v, want name measured", found.GetAttributes().GetMetadata())
	}
}

func (s *suite) errorCodes(t *testing.T) {
	ctx := s.ctx(t)
	const missing = "0000000000000000000000000000000000000000000000000000000000000000"
	expect := func(what string, err error, want codes.Code) {
		t.Helper()
		if got := status.Code(err); got != want {
			t.Errorf("%s: code %v (%v), want %v", what, got, err, want)
		}
	}
	expect("ContainerStatus of an unknown ID", second(s.cfg.Runtime.ContainerStatus(ctx, missing, false)), codes.NotFound)
	expect("PodSandboxStatus of an unknown ID", second(s.cfg.Runtime.PodSandboxStatus(ctx, missing, false)), codes.NotFound)
	expect("StopContainer of an unknown ID", s.cfg.Runtime.StopContainer(ctx, missing, 0), codes.NotFound)
	expect("StopPodSandbox of an unknown ID", s.cfg.Runtime.StopPodSandbox(ctx, missing), codes.NotFound)
	expect("StartContainer of an unknown ID", s.cfg.Runtime.StartContainer(ctx, missing), codes.NotFound)
	expect("RemoveContainer of an unknown ID", s.cfg.Runtime.RemoveContainer(ctx, missing), codes.OK)
	expect("RemovePodSandbox of an unknown ID", s.cfg.Runtime.RemovePodSandbox(ctx, missing), codes.OK)

	sb, sbCfg := s.sandbox(t, "errors")
	spec := s.longRunning("dup", "")
	dup := s.createContainer(t, sb, sbCfg, spec)
	_, err := s.cfg.Runtime.CreateContainer(ctx, sb, s.containerConfig(sbCfg, spec), sbCfg)
	expect("CreateContainer with a duplicate name and attempt", err, codes.Unknown)
	_, err = s.cfg.Runtime.RunPodSandbox(ctx, sbCfg, "")
	expect("RunPodSandbox with a duplicate name and attempt", err, codes.Unknown)
	_, err = s.cfg.Runtime.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{}, "")
	expect("RunPodSandbox without metadata", err, codes.Unknown)
	_, err = s.cfg.Runtime.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{Image: &runtimeapi.ImageSpec{Image: s.cfg.Image}}, sbCfg)
	expect("CreateContainer without metadata", err, codes.Unknown)
	absent := s.longRunning("absent-image", "")
	absentCfg := s.containerConfig(sbCfg, absent)
	absentCfg.Image = &runtimeapi.ImageSpec{Image: "nodekit.invalid/critest/absent:" + randomSuffix()}
	_, err = s.cfg.Runtime.CreateContainer(ctx, sb, absentCfg, sbCfg)
	expect("CreateContainer with an image that is not present", err, codes.NotFound)
	_, err = s.cfg.Runtime.CreateContainer(ctx, missing, s.containerConfig(sbCfg, spec), sbCfg)
	expect("CreateContainer in an unknown sandbox", err, codes.NotFound)
	_, _, err = s.cfg.Runtime.ExecSync(ctx, dup, []string{"true"}, 5*time.Second)
	expect("ExecSync in a container that is not running", err, codes.Unknown)

	done := s.startContainer(t, sb, sbCfg, containerSpec{name: "done", shell: "exit 0", env: map[string]string{"FAKECRI_EXIT_CODE": "0"}})
	s.waitExited(t, done)
	expect("StartContainer of an exited container", s.cfg.Runtime.StartContainer(ctx, done), codes.Unknown)
	expect("ReopenContainerLog of an exited container", s.cfg.Runtime.ReopenContainerLog(ctx, done), codes.Unknown)

	if err := s.cfg.Runtime.StopPodSandbox(ctx, sb); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	_, err = s.cfg.Runtime.CreateContainer(ctx, sb, s.containerConfig(sbCfg, s.longRunning("late", "")), sbCfg)
	expect("CreateContainer in a stopped sandbox", err, codes.NotFound)
}

func second[T any](_ T, err error) error { return err }
