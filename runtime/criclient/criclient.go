package criclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// Defaults of Dial, the kubelet's.
const (
	// DefaultTimeout bounds each CRI call except image pulls, exec and
	// event streams (the kubelet's --runtime-request-timeout).
	DefaultTimeout = 2 * time.Minute
	// DefaultConnectTimeout bounds the connection and Version check in
	// Dial.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultMaxMsgSize is the largest message sent or received (16 MiB).
	DefaultMaxMsgSize = 16 << 20
)

// Reconnection of a lost connection to the runtime, as the kubelet's CRI
// client reconnects: the first attempt 100ms after a failed one, each
// wait 1.6 times the last (within ±20%), at most 3s, instead of gRPC's
// 1s growing to 2 minutes; each attempt has at least 5s to connect.
const (
	reconnectBaseDelay = 100 * time.Millisecond
	reconnectMaxDelay  = 3 * time.Second
	minConnectTimeout  = 5 * time.Second
)

// connectParams are the gRPC connection parameters of Dial.
func connectParams() grpc.ConnectParams {
	return grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  reconnectBaseDelay,
			Multiplier: 1.6,
			Jitter:     0.2,
			MaxDelay:   reconnectMaxDelay,
		},
		MinConnectTimeout: minConnectTimeout,
	}
}

// DialOption changes a Dial default.
type DialOption func(*dialConfig)

type dialConfig struct {
	timeout        time.Duration
	connectTimeout time.Duration
	maxMsgSize     int
}

// WithTimeout sets the per-call timeout (default DefaultTimeout).
func WithTimeout(d time.Duration) DialOption { return func(c *dialConfig) { c.timeout = d } }

// WithConnectTimeout sets how long Dial waits for the runtime to answer
// Version (default DefaultConnectTimeout).
func WithConnectTimeout(d time.Duration) DialOption {
	return func(c *dialConfig) { c.connectTimeout = d }
}

// WithMaxMsgSize sets the largest gRPC message (default DefaultMaxMsgSize).
func WithMaxMsgSize(n int) DialOption { return func(c *dialConfig) { c.maxMsgSize = n } }

// Client is a CRI v1 client over gRPC. It implements both
// k8s.io/cri-api/pkg/apis.RuntimeService and ImageManagerService, and
// every error it returns is an *Error (see Error for the classes). It is
// safe for concurrent use. Values it returns belong to the caller.
type Client struct {
	endpoint string
	conn     *grpc.ClientConn
	rs       runtimeapi.RuntimeServiceClient
	is       runtimeapi.ImageServiceClient
	cfg      dialConfig
	version  *runtimeapi.VersionResponse
	// The scratch buffers and the interners are reused by the brief
	// lists (see BriefLister), one of each for each kind of list.
	sandboxScratch, containerScratch scratch
	sandboxStrings, containerStrings lockedInterner
}

var (
	_ criapi.RuntimeService      = (*Client)(nil)
	_ criapi.ImageManagerService = (*Client)(nil)
)

// Dial connects to the CRI runtime at endpoint ("unix:///path/to.sock" or
// an absolute path) and checks that it speaks CRI v1 by calling Version.
// It fails within the connect timeout, with an error naming the endpoint,
// when the socket is missing, refuses, or does not serve the CRI. A
// connection lost later (the runtime restarted) is made again with the
// kubelet's back-off, 100ms growing to 3s; calls meanwhile fail with
// runtime.ErrUnavailable.
func Dial(ctx context.Context, endpoint string, opts ...DialOption) (*Client, error) {
	cfg := dialConfig{timeout: DefaultTimeout, connectTimeout: DefaultConnectTimeout, maxMsgSize: DefaultMaxMsgSize}
	for _, o := range opts {
		o(&cfg)
	}
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cri: dial %s: %w", endpoint, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("cri: dial %s: %s is not a socket", endpoint, path)
	}
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.maxMsgSize), grpc.MaxCallSendMsgSize(cfg.maxMsgSize)),
		grpc.WithStaticStreamWindowSize(streamWindow),
		grpc.WithStaticConnWindowSize(connWindow),
		grpc.WithConnectParams(connectParams()),
	)
	if err != nil {
		return nil, fmt.Errorf("cri: dial %s: %w", endpoint, err)
	}
	c := &Client{endpoint: endpoint, conn: conn, rs: runtimeapi.NewRuntimeServiceClient(conn), is: runtimeapi.NewImageServiceClient(conn), cfg: cfg}

	vctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancel()
	v, err := c.rs.Version(vctx, &runtimeapi.VersionRequest{Version: "v1"}, grpc.WaitForReady(true))
	if err != nil {
		conn.Close()
		switch status.Code(err) {
		case codes.Unimplemented:
			return nil, fmt.Errorf("cri: %s does not serve the CRI v1 RuntimeService: %w", endpoint, Wrap("Version", "", err))
		case codes.DeadlineExceeded:
			return nil, fmt.Errorf("cri: %s did not answer the CRI Version call within %s: %w", endpoint, cfg.connectTimeout, Wrap("Version", "", err))
		}
		return nil, fmt.Errorf("cri: dial %s: %w", endpoint, Wrap("Version", "", err))
	}
	if v.GetRuntimeName() == "" {
		conn.Close()
		return nil, fmt.Errorf("cri: %s answered Version without a runtime name", endpoint)
	}
	c.version = v
	return c, nil
}

func socketPath(endpoint string) (string, error) {
	path := endpoint
	if strings.Contains(endpoint, "://") {
		scheme, rest, _ := strings.Cut(endpoint, "://")
		if scheme != "unix" {
			return "", fmt.Errorf("cri: endpoint %q: only unix sockets are supported", endpoint)
		}
		path = rest
	}
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("cri: endpoint %q: want unix:///absolute/path", endpoint)
	}
	return path, nil
}

// Endpoint returns the endpoint the client was dialled with.
func (c *Client) Endpoint() string { return c.endpoint }

// RuntimeName returns the runtime's name as it answered Version at Dial
// ("containerd", "fakecri").
func (c *Client) RuntimeName() string { return c.version.GetRuntimeName() }

// RuntimeVersion returns the runtime's version as it answered at Dial.
func (c *Client) RuntimeVersion() string { return c.version.GetRuntimeVersion() }

// Close closes the connection; calls in flight fail with Canceled.
func (c *Client) Close(context.Context) error {
	if err := c.conn.Close(); err != nil && status.Code(err) != codes.Canceled {
		return fmt.Errorf("cri: close %s: %w", c.endpoint, err)
	}
	return nil
}

func (c *Client) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.timeout)
}

// Version implements RuntimeService.
func (c *Client) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.Version(ctx, &runtimeapi.VersionRequest{Version: apiVersion})
	return resp, Wrap("Version", "", err)
}

// RunPodSandbox implements RuntimeService.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: handler})
	if err != nil {
		return "", Wrap("RunPodSandbox", sandboxName(config), err)
	}
	if resp.GetPodSandboxId() == "" {
		return "", fmt.Errorf("cri: RunPodSandbox %s: the runtime returned no sandbox ID", sandboxName(config))
	}
	return resp.GetPodSandboxId(), nil
}

func sandboxName(cfg *runtimeapi.PodSandboxConfig) string {
	m := cfg.GetMetadata()
	return m.GetNamespace() + "/" + m.GetName()
}

// StopPodSandbox implements RuntimeService.
func (c *Client) StopPodSandbox(ctx context.Context, id string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	return Wrap("StopPodSandbox", id, err)
}

// RemovePodSandbox implements RuntimeService.
func (c *Client) RemovePodSandbox(ctx context.Context, id string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return Wrap("RemovePodSandbox", id, err)
}

// PodSandboxStatus implements RuntimeService.
func (c *Client) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose})
	if err != nil {
		return nil, Wrap("PodSandboxStatus", id, err)
	}
	if resp.GetStatus() == nil {
		return nil, fmt.Errorf("cri: PodSandboxStatus %s: the runtime returned no status", id)
	}
	return resp, nil
}

// ListPodSandbox implements RuntimeService.
func (c *Client) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: f})
	return resp.GetItems(), Wrap("ListPodSandbox", "", err)
}

// CreateContainer implements RuntimeService.
func (c *Client) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: config, SandboxConfig: sandboxConfig})
	name := config.GetMetadata().GetName()
	if err != nil {
		return "", Wrap("CreateContainer", name, err)
	}
	if resp.GetContainerId() == "" {
		return "", fmt.Errorf("cri: CreateContainer %s: the runtime returned no container ID", name)
	}
	return resp.GetContainerId(), nil
}

// StartContainer implements RuntimeService.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	return Wrap("StartContainer", id, err)
}

// StopContainer implements RuntimeService. The call may take timeout
// seconds on top of the per-call timeout.
func (c *Client) StopContainer(ctx context.Context, id string, timeout int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.timeout+time.Duration(timeout)*time.Second)
	defer cancel()
	_, err := c.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeout})
	return Wrap("StopContainer", id, err)
}

// RemoveContainer implements RuntimeService.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return Wrap("RemoveContainer", id, err)
}

// ListContainers implements RuntimeService.
func (c *Client) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: f})
	return resp.GetContainers(), Wrap("ListContainers", "", err)
}

// ContainerStatus implements RuntimeService.
func (c *Client) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
	if err != nil {
		return nil, Wrap("ContainerStatus", id, err)
	}
	if resp.GetStatus() == nil {
		return nil, fmt.Errorf("cri: ContainerStatus %s: the runtime returned no status", id)
	}
	return resp, nil
}

// UpdateContainerResources implements RuntimeService.
func (c *Client) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.ContainerResources) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rs.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: res.GetLinux(), Windows: res.GetWindows()})
	return Wrap("UpdateContainerResources", id, err)
}

// ExecSync implements RuntimeService. A non-zero exit code is returned as
// a k8s.io/utils/exec.CodeExitError together with the output, as the
// upstream CRI client does; a command that outlives timeout fails with
// an error matching runtime.ErrDeadlineExceeded.
func (c *Client) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.cfg.timeout+timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	secs := int64(timeout / time.Second)
	if timeout > 0 && secs == 0 {
		secs = 1
	}
	resp, err := c.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: secs})
	if err != nil {
		return nil, nil, Wrap("ExecSync", id, err)
	}
	if resp.GetExitCode() != 0 {
		return resp.GetStdout(), resp.GetStderr(), utilexec.CodeExitError{
			Err:  fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), resp.GetExitCode(), resp.GetStderr()),
			Code: int(resp.GetExitCode()),
		}
	}
	return resp.GetStdout(), resp.GetStderr(), nil
}

// Exec implements RuntimeService.
func (c *Client) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.Exec(ctx, req)
	return resp, Wrap("Exec", req.GetContainerId(), err)
}

// Attach implements RuntimeService.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.Attach(ctx, req)
	return resp, Wrap("Attach", req.GetContainerId(), err)
}

// PortForward implements RuntimeService.
func (c *Client) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.PortForward(ctx, req)
	return resp, Wrap("PortForward", req.GetPodSandboxId(), err)
}

// ReopenContainerLog implements RuntimeService.
func (c *Client) ReopenContainerLog(ctx context.Context, id string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rs.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	return Wrap("ReopenContainerLog", id, err)
}

// CheckpointContainer implements RuntimeService.
func (c *Client) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rs.CheckpointContainer(ctx, req)
	return Wrap("CheckpointContainer", req.GetContainerId(), err)
}

// CheckpointPod implements RuntimeService.
func (c *Client) CheckpointPod(ctx context.Context, req *runtimeapi.CheckpointPodRequest) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rs.CheckpointPod(ctx, req)
	return Wrap("CheckpointPod", req.GetPodSandboxId(), err)
}

// RestorePod implements RuntimeService.
func (c *Client) RestorePod(ctx context.Context, req *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.RestorePod(ctx, req)
	return resp, Wrap("RestorePod", "", err)
}

// UpdatePodSandboxResources implements RuntimeService.
func (c *Client) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.UpdatePodSandboxResources(ctx, req)
	return resp, Wrap("UpdatePodSandboxResources", req.GetPodSandboxId(), err)
}

// GetContainerEvents implements RuntimeService: it opens the event stream
// and sends each event to ch until the stream breaks or ctx ends. It
// blocks, and always returns an error: the stream's, or ctx's. A runtime
// without the stream (containerd 1.6) fails at once with an error
// matching runtime.ErrUnimplemented.
func (c *Client) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	stream, err := c.rs.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return Wrap("GetContainerEvents", "", err)
	}
	if established != nil {
		established(stream)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return ctx.Err()
			}
			return Wrap("GetContainerEvents", "", err)
		}
		select {
		case ch <- ev:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ContainerStats implements RuntimeService.
func (c *Client) ContainerStats(ctx context.Context, id string) (*runtimeapi.ContainerStats, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
	return resp.GetStats(), Wrap("ContainerStats", id, err)
}

// ListContainerStats implements RuntimeService.
func (c *Client) ListContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: f})
	return resp.GetStats(), Wrap("ListContainerStats", "", err)
}

// PodSandboxStats implements RuntimeService.
func (c *Client) PodSandboxStats(ctx context.Context, id string) (*runtimeapi.PodSandboxStats, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: id})
	return resp.GetStats(), Wrap("PodSandboxStats", id, err)
}

// ListPodSandboxStats implements RuntimeService.
func (c *Client) ListPodSandboxStats(ctx context.Context, f *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: f})
	return resp.GetStats(), Wrap("ListPodSandboxStats", "", err)
}

// ListMetricDescriptors implements RuntimeService.
func (c *Client) ListMetricDescriptors(ctx context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.ListMetricDescriptors(ctx, &runtimeapi.ListMetricDescriptorsRequest{})
	return resp.GetDescriptors(), Wrap("ListMetricDescriptors", "", err)
}

// ListPodSandboxMetrics implements RuntimeService.
func (c *Client) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
	return resp.GetPodMetrics(), Wrap("ListPodSandboxMetrics", "", err)
}

// UpdateRuntimeConfig implements RuntimeService.
func (c *Client) UpdateRuntimeConfig(ctx context.Context, cfg *runtimeapi.RuntimeConfig) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rs.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: cfg})
	return Wrap("UpdateRuntimeConfig", "", err)
}

// Status implements RuntimeService.
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	if err != nil {
		return nil, Wrap("Status", "", err)
	}
	if resp.GetStatus() == nil {
		return nil, fmt.Errorf("cri: Status: the runtime returned no status")
	}
	return resp, nil
}

// RuntimeConfig implements RuntimeService.
func (c *Client) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	return resp, Wrap("RuntimeConfig", "", err)
}

// ListImages implements ImageManagerService.
func (c *Client) ListImages(ctx context.Context, f *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.is.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: f})
	return resp.GetImages(), Wrap("ListImages", "", err)
}

// ImageStatus implements ImageManagerService. An image that is not
// present gives a response whose Image is nil.
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
	if err != nil {
		return nil, Wrap("ImageStatus", image.GetImage(), err)
	}
	if img := resp.GetImage(); img != nil && img.GetId() == "" {
		return nil, fmt.Errorf("cri: ImageStatus %s: the runtime returned an image without an ID", image.GetImage())
	}
	return resp, nil
}

// PullImage implements ImageManagerService. Pulls have no per-call
// timeout (a large image may take long); bound them with ctx.
func (c *Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := c.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandboxConfig})
	if err != nil {
		return "", Wrap("PullImage", image.GetImage(), err)
	}
	if resp.GetImageRef() == "" {
		return "", fmt.Errorf("cri: PullImage %s: the runtime returned no image reference", image.GetImage())
	}
	return resp.GetImageRef(), nil
}

// RemoveImage implements ImageManagerService.
func (c *Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.is.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image})
	return Wrap("RemoveImage", image.GetImage(), err)
}

// ImageFsInfo implements ImageManagerService.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.is.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	return resp, Wrap("ImageFsInfo", "", err)
}

// Flow-control windows of the connection, fixed: a window that adapts
// costs a ping round trip per response (two wake-ups of the transport's
// goroutines on each side), and a local socket gains nothing from it.
const (
	streamWindow = 4 << 20
	connWindow   = 16 << 20
)
