package fakecri_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/runtime/fakecri"
)

const image = "busybox:1.36"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type env struct {
	t     *testing.T
	rt    *fakecri.Runtime
	clock *clocktesting.FakeClock
	ctx   context.Context
}

func newEnv(t *testing.T, cfg fakecri.Config) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(epoch)
	cfg.Clock = clk
	cfg.Images = append(cfg.Images, image)
	rt, err := fakecri.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, rt: rt, clock: clk, ctx: context.Background()}
}

func (e *env) sandbox(name string, hostNetwork bool) (string, *runtimeapi.PodSandboxConfig) {
	e.t.Helper()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: "uid-" + name},
		LogDirectory: e.t.TempDir(),
		Labels:       map[string]string{"pod": name},
	}
	if hostNetwork {
		cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}}
	}
	id, err := e.rt.RunPodSandbox(e.ctx, cfg, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return id, cfg
}

func envs(kv ...string) []*runtimeapi.KeyValue {
	var out []*runtimeapi.KeyValue
	for i := 0; i < len(kv); i += 2 {
		out = append(out, &runtimeapi.KeyValue{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return out
}

func (e *env) create(sb string, sbCfg *runtimeapi.PodSandboxConfig, name string, kv ...string) string {
	e.t.Helper()
	id, err := e.rt.CreateContainer(e.ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
		LogPath:  name + "/0.log",
		Envs:     envs(kv...),
	}, sbCfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) start(sb string, sbCfg *runtimeapi.PodSandboxConfig, name string, kv ...string) string {
	e.t.Helper()
	id := e.create(sb, sbCfg, name, kv...)
	if err := e.rt.StartContainer(e.ctx, id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) status(id string) *runtimeapi.ContainerStatus {
	e.t.Helper()
	resp, err := e.rt.ContainerStatus(e.ctx, id, false)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetStatus()
}

// waitForWaiters yields until a goroutine is blocked on the fake clock.
// It does not sleep; it fails after a bounded number of yields.
func (e *env) waitForWaiters() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !e.clock.HasWaiters() {
		if time.Now().After(deadline) {
			e.t.Fatal("nothing is waiting on the clock")
		}
		runtime.Gosched()
	}
}

func TestExitAfterDuration(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	id := e.start(sb, sbCfg, "c", fakecri.EnvExitAfter, "5s", fakecri.EnvExitCode, "3")
	e.clock.Step(4 * time.Second)
	if st := e.status(id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("state after 4s: %v, want running", st.GetState())
	}
	e.clock.Step(time.Second)
	st := e.status(id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 3 || st.GetReason() != "Error" {
		t.Fatalf("after 5s: state %v code %d reason %q, want exited 3 Error", st.GetState(), st.GetExitCode(), st.GetReason())
	}
	started := time.Unix(0, st.GetStartedAt())
	if started.Before(epoch) || started.Before(time.Unix(0, st.GetCreatedAt())) {
		t.Errorf("startedAt %v is before the clock's start %v or the creation", started, epoch)
	}
	if got, want := time.Unix(0, st.GetFinishedAt()), started.Add(5*time.Second); !got.Equal(want) {
		t.Errorf("finishedAt %v, want startedAt+5s = %v", got, want)
	}
}

func TestExitReasonOOMKilled(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	id := e.start(sb, sbCfg, "c", fakecri.EnvExitCode, "137", fakecri.EnvExitReason, "OOMKilled")
	if st := e.status(id); st.GetReason() != "OOMKilled" || st.GetExitCode() != 137 {
		t.Errorf("reason %q code %d, want OOMKilled 137", st.GetReason(), st.GetExitCode())
	}
}

func TestStartError(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	id := e.create(sb, sbCfg, "c", fakecri.EnvStartError, "exec: \"nope\": executable file not found")
	err := e.rt.StartContainer(e.ctx, id)
	if err == nil || !strings.Contains(err.Error(), "executable file not found") {
		t.Fatalf("StartContainer: %v, want the scripted start error", err)
	}
	st := e.status(id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 128 || st.GetReason() != "StartError" {
		t.Errorf("state %v code %d reason %q, want exited 128 StartError", st.GetState(), st.GetExitCode(), st.GetReason())
	}
}

func TestStop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		timeout  int64
		step     time.Duration // how far the clock moves while the stop waits
		wantCode int32
	}{
		{name: "handles SIGTERM", timeout: 30, wantCode: 143},
		{name: "custom SIGTERM code", env: []string{fakecri.EnvTermExitCode, "0"}, timeout: 30, wantCode: 0},
		{name: "timeout 0 kills", timeout: 0, wantCode: 137},
		{name: "ignores SIGTERM", env: []string{fakecri.EnvIgnoreSIGTERM, "true"}, timeout: 10, step: 10 * time.Second, wantCode: 137},
		{name: "slow exit within grace", env: []string{fakecri.EnvStopDelay, "3s"}, timeout: 10, step: 3 * time.Second, wantCode: 143},
		{name: "slow exit beyond grace", env: []string{fakecri.EnvStopDelay, "30s"}, timeout: 10, step: 10 * time.Second, wantCode: 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, fakecri.Config{})
			sb, sbCfg := e.sandbox("p", false)
			id := e.start(sb, sbCfg, "c", tc.env...)
			done := make(chan error, 1)
			go func() { done <- e.rt.StopContainer(e.ctx, id, tc.timeout) }()
			if tc.step > 0 {
				e.waitForWaiters()
				e.clock.Step(tc.step - time.Nanosecond)
				if st := e.status(id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
					t.Fatalf("exited before %v: %v", tc.step, st.GetState())
				}
				e.clock.Step(time.Nanosecond)
			}
			if err := <-done; err != nil {
				t.Fatalf("StopContainer: %v", err)
			}
			if st := e.status(id); st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != tc.wantCode {
				t.Errorf("state %v code %d, want exited %d", st.GetState(), st.GetExitCode(), tc.wantCode)
			}
		})
	}
}

func TestStopReturnsWhenContextEnds(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	id := e.start(sb, sbCfg, "c", fakecri.EnvIgnoreSIGTERM, "true")
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	err := e.rt.StopContainer(ctx, id, 30)
	if status.Code(err) != codes.Canceled {
		t.Errorf("StopContainer with a cancelled context: %v, want Canceled", err)
	}
	if st := e.status(id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("state %v, want still running", st.GetState())
	}
}

func TestBadScriptIsInvalidArgument(t *testing.T) {
	for _, kv := range [][]string{
		{fakecri.EnvExitAfter, "soon"},
		{fakecri.EnvExitCode, "x"},
		{fakecri.EnvExec, "{not json"},
		{fakecri.EnvMemoryBytes, "-1"},
		{"FAKECRI_TYPO", "1"},
	} {
		e := newEnv(t, fakecri.Config{})
		sb, sbCfg := e.sandbox("p", false)
		_, err := e.rt.CreateContainer(e.ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Image:    &runtimeapi.ImageSpec{Image: image},
			Envs:     envs(kv...),
		}, sbCfg)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s: %v, want InvalidArgument naming the variable", kv[0], kv[1], err)
		}
	}
}

func TestExecSync(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	id := e.start(sb, sbCfg, "c",
		fakecri.EnvExec, `{"cat /tmp/healthy": {"exitCode": 1, "stderr": "cat: can't open '/tmp/healthy'\n"}, "slow": {"delay": "5s", "stdout": "late\n"}}`,
		fakecri.EnvExecExitCode, "2",
		"GREETING", "hi")
	for _, tc := range []struct {
		cmd        []string
		wantOut    string
		wantErr    string
		wantCode   int
		wantStatus codes.Code
	}{
		{cmd: []string{"echo", "a", "b"}, wantOut: "a b\n"},
		{cmd: []string{"true"}},
		{cmd: []string{"false"}, wantCode: 1},
		{cmd: []string{"env"}, wantOut: "FAKECRI_EXEC="},
		{cmd: []string{"cat", "/tmp/healthy"}, wantErr: "can't open", wantCode: 1},
		{cmd: []string{"anything", "else"}, wantCode: 2},
	} {
		stdout, stderr, err := e.rt.ExecSync(e.ctx, id, tc.cmd, time.Second)
		var exitErr utilexec.ExitError
		code := 0
		if errors.As(err, &exitErr) {
			code = exitErr.ExitStatus()
		} else if err != nil {
			t.Errorf("%v: %v", tc.cmd, err)
			continue
		}
		if code != tc.wantCode || !strings.Contains(string(stdout), tc.wantOut) || !strings.Contains(string(stderr), tc.wantErr) {
			t.Errorf("%v: code %d stdout %q stderr %q, want %d %q %q", tc.cmd, code, stdout, stderr, tc.wantCode, tc.wantOut, tc.wantErr)
		}
	}

	// A command slower than the timeout fails with DeadlineExceeded once
	// the timeout has passed on the clock.
	done := make(chan error, 1)
	go func() {
		_, _, err := e.rt.ExecSync(e.ctx, id, []string{"slow"}, 2*time.Second)
		done <- err
	}()
	e.waitForWaiters()
	e.clock.Step(2 * time.Second)
	if err := <-done; status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("slow exec: %v, want DeadlineExceeded", err)
	}

	// Results can be changed while the container runs.
	if err := e.rt.SetExecResult(id, "cat /tmp/healthy", fakecri.ExecResult{Stdout: "ok\n"}); err != nil {
		t.Fatal(err)
	}
	if out, _, err := e.rt.ExecSync(e.ctx, id, []string{"cat", "/tmp/healthy"}, time.Second); err != nil || string(out) != "ok\n" {
		t.Errorf("after SetExecResult: %q %v, want ok", out, err)
	}
}

func TestLogsAndTerminationMessage(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	msgFile := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(msgFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := e.rt.CreateContainer(e.ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image:    &runtimeapi.ImageSpec{Image: image},
		LogPath:  "c/0.log",
		Envs:     envs(fakecri.EnvLog, "one\ntwo", fakecri.EnvExitCode, "1", fakecri.EnvTerminationMessage, "bad config"),
		Mounts:   []*runtimeapi.Mount{{ContainerPath: "/dev/termination-log", HostPath: msgFile}},
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rt.StartContainer(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(sbCfg.LogDirectory, "c/0.log"))
	if err != nil {
		t.Fatal(err)
	}
	stamp := time.Unix(0, e.status(id).GetStartedAt()).UTC().Format(time.RFC3339Nano)
	want := stamp + " stdout F one\n" + stamp + " stdout F two\n"
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	if msg, _ := os.ReadFile(msgFile); string(msg) != "bad config" {
		t.Errorf("termination message %q, want %q", msg, "bad config")
	}
}

func TestSandboxIPs(t *testing.T) {
	e := newEnv(t, fakecri.Config{PodCIDR: "127.90.0.0/30"})
	ip := func(id string) string {
		resp, err := e.rt.PodSandboxStatus(e.ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetStatus().GetNetwork().GetIp()
	}
	a, _ := e.sandbox("a", false)
	b, _ := e.sandbox("b", false)
	h, _ := e.sandbox("h", true)
	if ip(a) != "127.90.0.1" || ip(b) != "127.90.0.2" || ip(h) != "" {
		t.Errorf("IPs a=%q b=%q host=%q, want 127.90.0.1, 127.90.0.2 and none", ip(a), ip(b), ip(h))
	}
	if addr := netip.MustParseAddr(ip(a)); !addr.IsLoopback() {
		t.Errorf("%v is not a loopback address", addr)
	}
	c, _ := e.sandbox("c", false)
	if ip(c) != "127.90.0.3" {
		t.Errorf("third IP %q, want 127.90.0.3", ip(c))
	}
	_, err := e.rt.RunPodSandbox(e.ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "d", Namespace: "ns", Uid: "d"}}, "")
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("sandbox beyond the range: %v, want ResourceExhausted", err)
	}
	if err := e.rt.RemovePodSandbox(e.ctx, b); err != nil {
		t.Fatal(err)
	}
	d, _ := e.sandbox("d", false)
	if ip(d) != "127.90.0.2" {
		t.Errorf("IP after a release %q, want the freed 127.90.0.2", ip(d))
	}
}

func TestEvents(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	ctx, cancel := context.WithCancel(e.ctx)
	ch := make(chan *runtimeapi.ContainerEventResponse, 1) // small: the runtime must queue, not drop
	established := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.rt.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	<-established

	sb, sbCfg := e.sandbox("p", false)
	id := e.start(sb, sbCfg, "c", fakecri.EnvExitCode, "0")
	if err := e.rt.RemovePodSandbox(e.ctx, sb); err != nil {
		t.Fatal(err)
	}
	type ev struct {
		id  string
		typ runtimeapi.ContainerEventType
	}
	want := []ev{
		{sb, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
	}
	var got []ev
	for range want {
		r := <-ch
		got = append(got, ev{r.GetContainerId(), r.GetContainerEventType()})
		if r.GetPodSandboxStatus().GetMetadata().GetName() != "p" {
			t.Errorf("event %v carries sandbox status %v, want pod p", r.GetContainerEventType(), r.GetPodSandboxStatus())
		}
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(ev{})); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("GetContainerEvents after cancel: %v, want context.Canceled", err)
	}
}

func TestCloseEndsEventStreams(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	done := make(chan error, 1)
	established := make(chan struct{})
	go func() {
		done <- e.rt.GetContainerEvents(e.ctx, make(chan *runtimeapi.ContainerEventResponse), func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	<-established
	if err := e.rt.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Errorf("GetContainerEvents after Close: %v, want Unavailable", err)
	}
}

func TestImages(t *testing.T) {
	e := newEnv(t, fakecri.Config{Registry: []string{"busybox:1.36", "registry.test/app:v1"}})
	pull := func(ref string, annotations map[string]string) (string, error) {
		return e.rt.PullImage(e.ctx, &runtimeapi.ImageSpec{Image: ref}, nil, &runtimeapi.PodSandboxConfig{Annotations: annotations})
	}
	if _, err := pull("registry.test/app:v1", nil); err != nil {
		t.Fatalf("pull from the registry: %v", err)
	}
	if _, err := pull("registry.test/other:v1", nil); status.Code(err) != codes.NotFound {
		t.Errorf("pull of an image outside the registry: %v, want NotFound", err)
	}
	if _, err := pull("Not A Reference", nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("pull of a malformed reference: %v, want InvalidArgument", err)
	}
	if _, err := pull("registry.test/app:v1", map[string]string{fakecri.AnnotationPullError: "unauthorized"}); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Errorf("pull with the pull-error annotation: %v, want the scripted error", err)
	}
	// Normalised names: busybox:1.36 is docker.io/library/busybox:1.36.
	st, err := e.rt.ImageStatus(e.ctx, &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"}, false)
	if err != nil || st.GetImage() == nil {
		t.Fatalf("ImageStatus by full name: %v %v", st, err)
	}
	byID, err := e.rt.ImageStatus(e.ctx, &runtimeapi.ImageSpec{Image: st.GetImage().GetId()}, false)
	if err != nil || byID.GetImage().GetId() != st.GetImage().GetId() {
		t.Errorf("ImageStatus by ID: %v %v", byID, err)
	}
	if err := e.rt.RemoveImage(e.ctx, &runtimeapi.ImageSpec{Image: "busybox:1.36"}); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.RemoveImage(e.ctx, &runtimeapi.ImageSpec{Image: "busybox:1.36"}); err != nil {
		t.Errorf("removing an absent image: %v, want success", err)
	}
	list, _ := e.rt.ListImages(e.ctx, nil)
	if len(list) != 1 || list[0].GetRepoTags()[0] != "registry.test/app:v1" {
		t.Errorf("images %v, want just registry.test/app:v1", list)
	}
}

func TestPullDelay(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	if err := e.rt.SetPull("slow.test/app:1", fakecri.PullBehavior{Delay: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.rt.PullImage(e.ctx, &runtimeapi.ImageSpec{Image: "slow.test/app:1"}, nil, nil)
		done <- err
	}()
	e.waitForWaiters()
	e.clock.Step(29 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("pull finished before its delay: %v", err)
	default:
	}
	e.clock.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestStats(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	a := e.start(sb, sbCfg, "a", fakecri.EnvMemoryBytes, "1000", fakecri.EnvCPUNanoCores, "500000000")
	e.start(sb, sbCfg, "b", fakecri.EnvMemoryBytes, "24")
	e.clock.Step(10 * time.Second)
	st, err := e.rt.ContainerStats(e.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetMemory().GetWorkingSetBytes().GetValue() != 1000 || st.GetCpu().GetUsageNanoCores().GetValue() != 5e8 {
		t.Errorf("stats %v, want 1000 bytes and half a core", st)
	}
	elapsed := epoch.Add(10*time.Second).UnixNano() - e.status(a).GetStartedAt()
	if got, want := st.GetCpu().GetUsageCoreNanoSeconds().GetValue(), uint64(elapsed/2); got != want {
		t.Errorf("CPU time after %v at half a core: %d ns, want %d", time.Duration(elapsed), got, want)
	}
	pod, err := e.rt.PodSandboxStats(e.ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.GetLinux().GetMemory().GetWorkingSetBytes().GetValue(); got != 1024 {
		t.Errorf("pod working set %d, want 1024", got)
	}
	if err := e.rt.SetUsage(a, 5, 0); err != nil {
		t.Fatal(err)
	}
	list, _ := e.rt.ListPodSandboxStats(e.ctx, nil)
	if len(list) != 1 || list[0].GetLinux().GetMemory().GetWorkingSetBytes().GetValue() != 29 {
		t.Errorf("pod stats after SetUsage: %v, want 29 bytes", list)
	}
}

func TestScriptAndExit(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	e.rt.Script(fakecri.Match{Pod: "p", Container: "crasher"}, fakecri.Behavior{Exit: true, ExitCode: 2})
	sb, sbCfg := e.sandbox("p", false)
	crasher := e.start(sb, sbCfg, "crasher")
	other := e.start(sb, sbCfg, "other")
	if st := e.status(crasher); st.GetExitCode() != 2 || st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("scripted container: %v %d, want exited 2", st.GetState(), st.GetExitCode())
	}
	if st := e.status(other); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("unscripted container: %v, want running", st.GetState())
	}
	if err := e.rt.Exit(other, 0, ""); err != nil {
		t.Fatal(err)
	}
	if st := e.status(other); st.GetReason() != "Completed" {
		t.Errorf("after Exit: reason %q, want Completed", st.GetReason())
	}
}

func TestInjectErrorAndCalls(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	e.rt.InjectError("RunPodSandbox", status.Error(codes.Unavailable, "network plugin not ready"))
	_, err := e.rt.RunPodSandbox(e.ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: "u"}}, "")
	if status.Code(err) != codes.Unavailable {
		t.Errorf("injected error: %v", err)
	}
	if _, err := e.rt.RunPodSandbox(e.ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: "u"}}, ""); err != nil {
		t.Errorf("second call: %v, want the injected error used up", err)
	}
	if diff := cmp.Diff([]string{"RunPodSandbox", "RunPodSandbox"}, e.rt.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	e.rt.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni config uninitialized")
	st, _ := e.rt.Status(e.ctx, false)
	for _, c := range st.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.NetworkReady && (c.GetStatus() || c.GetReason() != "NetworkPluginNotReady") {
			t.Errorf("NetworkReady %v, want false with the reason", c)
		}
	}
}

func TestPrefixLookup(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	id := e.start(sb, sbCfg, "c")
	if st := e.status(id[:12]); st.GetId() != id {
		t.Errorf("lookup by a 12-digit prefix gave %s, want %s", st.GetId(), id)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []fakecri.Config{
		{PodCIDR: "not-a-cidr"},
		{PodCIDR: "fd00::/64"},
		{Images: []string{"not a reference"}},
		{Registry: []string{"busybox@sha256:short"}},
	} {
		if _, err := fakecri.New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", cfg)
		}
	}
}

// A scripted exit fires inside the fake clock's Step, which holds the
// clock's lock, while other calls hold the runtime's lock and read the
// clock: neither waits for the other for ever.
func TestScriptedExitsAndCallsDuringSteps(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	const n = 200
	for i := 0; i < n; i++ {
		e.start(sb, sbCfg, fmt.Sprint("c", i), fakecri.EnvExitAfter, fmt.Sprintf("%dms", i+1))
	}
	stop := make(chan struct{})
	callers := make(chan struct{})
	go func() {
		defer close(callers)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.rt.PodSandboxStatus(e.ctx, sb, false); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	stepped := make(chan struct{})
	go func() {
		defer close(stepped)
		for i := 0; i < n; i++ {
			e.clock.Step(time.Millisecond)
		}
	}()
	select {
	case <-stepped:
	case <-time.After(20 * time.Second):
		t.Fatal("the clock's steps and the runtime's calls deadlocked")
	}
	close(stop)
	<-callers
	if err := e.rt.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := e.rt.ListContainers(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Fatalf("container %s is %v after its exit time, want exited", c.GetMetadata().GetName(), c.GetState())
		}
	}
}

// A container's status reports the resources it was created with (then
// the last update's) and its process's user, as containerd does.
func TestContainerStatusReportsResourcesAndUser(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	sb, sbCfg := e.sandbox("p", false)
	res := &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 64 << 20}
	for _, tc := range []struct {
		name string
		sc   *runtimeapi.LinuxContainerSecurityContext
		want *runtimeapi.LinuxContainerUser
	}{
		{"root", nil, &runtimeapi.LinuxContainerUser{SupplementalGroups: []int64{0}}},
		{"user, group and groups", &runtimeapi.LinuxContainerSecurityContext{
			RunAsUser: &runtimeapi.Int64Value{Value: 1000}, RunAsGroup: &runtimeapi.Int64Value{Value: 3000}, SupplementalGroups: []int64{4000, 3000, 5000}},
			&runtimeapi.LinuxContainerUser{Uid: 1000, Gid: 3000, SupplementalGroups: []int64{3000, 4000, 5000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := e.rt.CreateContainer(e.ctx, sb, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: strings.ReplaceAll(tc.name, " ", "-")},
				Image:    &runtimeapi.ImageSpec{Image: image},
				Linux:    &runtimeapi.LinuxContainerConfig{Resources: res, SecurityContext: tc.sc},
			}, sbCfg)
			if err != nil {
				t.Fatal(err)
			}
			st := e.status(id)
			if got := st.GetResources().GetLinux(); !proto.Equal(got, res) {
				t.Errorf("resources %v, want %v", got, res)
			}
			if got := st.GetUser().GetLinux(); !proto.Equal(got, tc.want) {
				t.Errorf("user %v, want %v", got, tc.want)
			}
			upd := &runtimeapi.LinuxContainerResources{CpuShares: 1024, MemoryLimitInBytes: 32 << 20}
			if err := e.rt.UpdateContainerResources(e.ctx, id, &runtimeapi.ContainerResources{Linux: upd}); err != nil {
				t.Fatal(err)
			}
			if got := e.status(id).GetResources().GetLinux(); !proto.Equal(got, upd) {
				t.Errorf("resources after an update %v, want %v", got, upd)
			}
		})
	}
}
