package probes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/internal/httpget"
	"github.com/nodekit/nodekit/internal/podutil"
)

// maxBody is how much of an HTTP probe's answer is read, the kubelet's.
const maxBody = 10 << 10

// UserAgent is sent with HTTP probes unless the probe sets one.
const UserAgent = "kube-probe/1.37"

// Execer runs a command in a container; a CRI RuntimeService is one.
type Execer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// Handlers is the default Prober: exec through the runtime, HTTP GET,
// TCP connect and gRPC health checks, with the kubelet's semantics.
type Handlers struct {
	// Exec runs exec probes. Nil: exec probes fail.
	Exec Execer
	// HostIP replaces an empty pod IP (host-network pods). Default
	// 127.0.0.1.
	HostIP string

	// once builds transport, shared by every HTTP probe.
	once      sync.Once
	transport *http.Transport
}

var _ Prober = (*Handlers)(nil)

// Probe implements Prober.
func (h *Handlers) Probe(ctx context.Context, t Target, p *v1.Probe, timeout time.Duration) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch n := handlerCount(p); {
	case n == 0:
		return Failure, "", errors.New("the probe has no handler (exec, httpGet, tcpSocket or grpc)")
	case n > 1:
		return Failure, "", errors.New("the probe has more than one handler")
	}
	switch {
	case p.Exec != nil:
		return h.exec(ctx, t, p.Exec, timeout)
	case p.HTTPGet != nil:
		return h.httpGet(ctx, t, p.HTTPGet, timeout)
	case p.TCPSocket != nil:
		return h.tcp(ctx, t, p.TCPSocket)
	default:
		return h.grpc(ctx, t, p.GRPC)
	}
}

func handlerCount(p *v1.Probe) int {
	n := 0
	for _, set := range []bool{p.Exec != nil, p.HTTPGet != nil, p.TCPSocket != nil, p.GRPC != nil} {
		if set {
			n++
		}
	}
	return n
}

func (h *Handlers) exec(ctx context.Context, t Target, a *v1.ExecAction, timeout time.Duration) (Result, string, error) {
	if h.Exec == nil {
		return Failure, "", errors.New("exec probes need a runtime to exec in")
	}
	stdout, stderr, err := h.Exec.ExecSync(ctx, t.ContainerID, a.Command, timeout)
	out := string(stdout) + string(stderr)
	var exitErr utilexec.ExitError
	switch {
	case err == nil:
		return Success, out, nil
	case errors.As(err, &exitErr):
		return Failure, out, nil
	case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
		return Failure, fmt.Sprintf("command %q timed out", strings.Join(a.Command, " ")), nil
	}
	return Failure, "", fmt.Errorf("exec %q: %w", strings.Join(a.Command, " "), err)
}

func (h *Handlers) host(t Target, explicit string) string {
	switch {
	case explicit != "":
		return explicit
	case t.PodIP != "":
		return t.PodIP
	case h.HostIP != "":
		return h.HostIP
	}
	return "127.0.0.1"
}

func (h *Handlers) httpGet(ctx context.Context, t Target, g *v1.HTTPGetAction, timeout time.Duration) (Result, string, error) {
	pn, err := podutil.ResolvePort(g.Port, t.Container)
	if err != nil {
		return Failure, "", err
	}
	req, err := httpget.NewRequest(ctx, g, h.host(t, ""), pn, UserAgent)
	if err != nil {
		return Failure, "", err
	}
	h.once.Do(func() { h.transport = httpget.NewTransport() })
	client := &http.Client{
		Timeout:   timeout,
		Transport: h.transport,
		// A redirect elsewhere ends the probe with the redirect response
		// itself, a Warning below.
		CheckRedirect: httpget.CheckRedirect,
	}
	resp, err := client.Do(req)
	if err != nil {
		return Failure, err.Error(), nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return Success, string(body), nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// A redirect that was not followed: the kubelet passes the probe
		// with a warning.
		return Warning, "Probe terminated redirects, Response body: " + string(body), nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
}

func (h *Handlers) tcp(ctx context.Context, t Target, a *v1.TCPSocketAction) (Result, string, error) {
	pn, err := podutil.ResolvePort(a.Port, t.Container)
	if err != nil {
		return Failure, "", err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(h.host(t, a.Host), strconv.Itoa(pn)))
	if err != nil {
		return Failure, err.Error(), nil
	}
	_ = conn.Close()
	return Success, "", nil
}

func (h *Handlers) grpc(ctx context.Context, t Target, a *v1.GRPCAction) (Result, string, error) {
	if a.Port < 1 || a.Port > 65535 {
		return Failure, "", fmt.Errorf("invalid port %d", a.Port)
	}
	conn, err := grpc.NewClient(net.JoinHostPort(h.host(t, ""), strconv.Itoa(int(a.Port))),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(UserAgent))
	if err != nil {
		return Failure, "", err
	}
	defer conn.Close()
	service := ""
	if a.Service != nil {
		service = *a.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		switch status.Code(err) {
		case codes.Unimplemented:
			return Failure, "this server does not implement the grpc health protocol (grpc.health.v1.Health)", nil
		case codes.DeadlineExceeded:
			return Failure, "timeout: health rpc did not complete within the probe timeout", nil
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus()), nil
	}
	return Success, "", nil
}
