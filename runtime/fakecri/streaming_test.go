package fakecri_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/fakecri"
)

// Exec, Attach and PortForward answer URLs on the streaming server while
// it runs, and Unimplemented before and after.
func TestStreamingURLs(t *testing.T) {
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}}
	sb, err := fake.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, sbCfg); err != nil {
		t.Fatal(err)
	}
	id, err := fake.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	exec := &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"cat"}, Stdin: true, Stdout: true}
	if _, err := fake.Exec(ctx, exec); status.Code(err) != codes.Unimplemented {
		t.Errorf("Exec without a streaming server: %v, want Unimplemented", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fake.NewStreamingServer(lis)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.NewStreamingServer(lis); err == nil {
		t.Error("a second streaming server was accepted")
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	if _, err := fake.Exec(ctx, exec); err == nil || !strings.Contains(err.Error(), "CONTAINER_CREATED") {
		t.Errorf("Exec in a container not started: %v, want an error naming its state", err)
	}
	if err := fake.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	base := "http://" + lis.Addr().String() + "/"
	resp, err := fake.Exec(ctx, exec)
	if err != nil || !strings.HasPrefix(resp.GetUrl(), base+"exec/") {
		t.Errorf("Exec: %v %v, want a URL under %s", resp, err, base)
	}
	att, err := fake.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Stdout: true})
	if err != nil || !strings.HasPrefix(att.GetUrl(), base+"attach/") {
		t.Errorf("Attach: %v %v", att, err)
	}
	// Headers beyond the bound are refused before any session is looked up.
	req, _ := http.NewRequest(http.MethodPost, resp.GetUrl(), nil)
	req.Header.Set("X-Big", strings.Repeat("x", 128<<10))
	if big, err := http.DefaultClient.Do(req); err != nil || big.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a request with 128 KiB of headers: %v, %v; want 431", big, err)
	} else {
		big.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()
	pf, err := fake.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb, Port: []int32{80}})
	if err != nil || !strings.HasPrefix(pf.GetUrl(), base+"portforward/") {
		t.Errorf("PortForward: %v %v", pf, err)
	}
	if _, err := fake.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("PortForward to an unknown sandbox: %v, want NotFound", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, err := fake.Exec(ctx, exec); status.Code(err) != codes.Unimplemented {
		t.Errorf("Exec after the streaming server stopped: %v, want Unimplemented", err)
	}
}
