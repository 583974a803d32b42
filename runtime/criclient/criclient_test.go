package criclient_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func TestDialErrorsNameTheEndpoint(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// A socket that accepts connections and never answers.
	silent := filepath.Join(dir, "silent.sock")
	lis, err := net.Listen("unix", silent)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		lis.Close()
		for c := range accepted {
			c.Close()
		}
	}()

	// A gRPC server without the CRI services.
	notCRI := filepath.Join(dir, "grpc.sock")
	glis, err := net.Listen("unix", notCRI)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	go func() { _ = g.Serve(glis) }()
	defer g.Stop()

	for _, tc := range []struct {
		name     string
		endpoint string
		want     string
	}{
		{"missing socket", "unix://" + filepath.Join(dir, "absent.sock"), "no such file"},
		{"not a socket", "unix://" + plain, "is not a socket"},
		{"relative path", "unix://relative.sock", "absolute"},
		{"tcp", "tcp://127.0.0.1:1", "only unix sockets"},
		{"silent peer", "unix://" + silent, "did not answer the CRI Version call"},
		{"not a CRI server", notCRI, "does not serve the CRI v1 RuntimeService"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c, err := criclient.Dial(context.Background(), tc.endpoint, criclient.WithConnectTimeout(500*time.Millisecond))
			if err == nil {
				c.Close(context.Background())
				t.Fatal("Dial succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), strings.TrimPrefix(tc.endpoint, "unix://")) {
				t.Errorf("error %q, want it to say %q and name the endpoint", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Dial took %v, want it within the connect timeout", d)
			}
		})
	}
}

func TestClientErrorClasses(t *testing.T) {
	fake, c := serveFake(t, fakecri.Config{Images: []string{"busybox:1.36"}})
	ctx := context.Background()
	const missing = "0000000000000000000000000000000000000000000000000000000000000000"

	_, err := c.ContainerStatus(ctx, missing, false)
	if !errors.Is(err, runtime.ErrNotFound) || status.Code(err) != codes.NotFound {
		t.Errorf("ContainerStatus of an unknown ID: %v, want ErrNotFound with code NotFound", err)
	}
	var ce *criclient.Error
	if !errors.As(err, &ce) || ce.Op != "ContainerStatus" || ce.ID != missing {
		t.Errorf("error %#v, want a *criclient.Error naming the op and ID", err)
	}

	fake.InjectError("Status", status.Error(codes.Unavailable, "shutting down"))
	if _, err := c.Status(ctx, false); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("Status: %v, want ErrUnavailable", err)
	}
	fake.InjectError("ListContainers", status.Error(codes.DeadlineExceeded, "slow"))
	if _, err := c.ListContainers(ctx, nil); !errors.Is(err, runtime.ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ListContainers: %v, want ErrDeadlineExceeded and context.DeadlineExceeded", err)
	}
	if _, err := c.PortForward(ctx, &runtimeapi.PortForwardRequest{}); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Errorf("PortForward without a sandbox: %v, want ErrInvalidArgument", err)
	}
	fake.InjectError("PortForward", status.Error(codes.Unimplemented, "no streaming server"))
	if _, err := c.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: missing}); !errors.Is(err, runtime.ErrUnimplemented) {
		t.Errorf("PortForward: %v, want ErrUnimplemented", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Version(cctx, "v1"); !errors.Is(err, context.Canceled) {
		t.Errorf("Version with a cancelled context: %v, want context.Canceled", err)
	}

	// ExecSync: a non-zero exit is an exit error carrying the output.
	sb, err := c.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: "u"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Envs: []*runtimeapi.KeyValue{{Key: fakecri.EnvExec, Value: []byte(`{"check": {"exitCode": 3, "stdout": "bad\n"}}`)}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	out, _, err := c.ExecSync(ctx, id, []string{"check"}, time.Second)
	var exitErr utilexec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 3 || string(out) != "bad\n" {
		t.Errorf("ExecSync: %q %v, want exit status 3 with the output", out, err)
	}
}

func TestClientStreamsEvents(t *testing.T) {
	fake, c := serveFake(t, fakecri.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan *runtimeapi.ContainerEventResponse, 16)
	established := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- c.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	<-established
	// The server subscribes asynchronously; make events until one arrives.
	var got *runtimeapi.ContainerEventResponse
	for i := 0; got == nil && i < 100; i++ {
		meta := &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: fmt.Sprint("uid-", i)}
		if _, err := fake.RunPodSandbox(context.Background(), &runtimeapi.PodSandboxConfig{Metadata: meta}, ""); err != nil {
			t.Fatal(err)
		}
		select {
		case got = <-ch:
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got == nil || got.GetContainerEventType() != runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT || got.GetPodSandboxStatus() == nil {
		t.Fatalf("first event %v, want a created event with the sandbox status", got)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("GetContainerEvents after cancel: %v", err)
	}
}

// eventlessServer is a CRI server that, like containerd 1.6, answers
// Version but not GetContainerEvents.
type eventlessServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (eventlessServer) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "old", RuntimeVersion: "1.6", RuntimeApiVersion: "v1"}, nil
}

func TestClientEventsUnimplemented(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "old.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(g, eventlessServer{})
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()
	c, err := criclient.Dial(context.Background(), "unix://"+sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if c.RuntimeName() != "old" || c.RuntimeVersion() != "1.6" {
		t.Errorf("runtime %s %s, want old 1.6", c.RuntimeName(), c.RuntimeVersion())
	}
	err = c.GetContainerEvents(context.Background(), make(chan *runtimeapi.ContainerEventResponse), nil)
	if !errors.Is(err, runtime.ErrUnimplemented) {
		t.Errorf("GetContainerEvents on a runtime without it: %v, want ErrUnimplemented", err)
	}
}
