package fakecri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// MaxMsgSize is the largest gRPC message the server sends or receives,
// the kubelet's limit (16 MiB).
const MaxMsgSize = 16 << 20

// streamBatch is how many items each message of a Stream* list call
// carries.
const streamBatch = 256

// Server serves a RuntimeService and an ImageManagerService (any
// implementation: a *Runtime, cri-api's testing fakes, a wrapper of your
// own) as the CRI v1 gRPC services. It translates between the Go
// interfaces and the wire types: an ExecSync exit code returned as a
// k8s.io/utils/exec.ExitError becomes the response's ExitCode, and
// GetContainerEvents streams what the interface delivers on its channel.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	rs criapi.RuntimeService
	is criapi.ImageManagerService
}

var (
	_ runtimeapi.RuntimeServiceServer = (*Server)(nil)
	_ runtimeapi.ImageServiceServer   = (*Server)(nil)
)

// NewServer returns a Server for rs and is. Register it on a grpc.Server
// of your own with Register, or call Serve.
func NewServer(rs criapi.RuntimeService, is criapi.ImageManagerService) *Server {
	return &Server{rs: rs, is: is}
}

// Register registers both CRI services on g.
func (s *Server) Register(g *grpc.Server) {
	runtimeapi.RegisterRuntimeServiceServer(g, s)
	runtimeapi.RegisterImageServiceServer(g, s)
}

// Serve serves the CRI on lis until ctx ends, then stops the gRPC server,
// ending open streams, and returns nil. It returns an error only if
// serving fails. Serve closes lis.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	g := grpc.NewServer(grpc.MaxRecvMsgSize(MaxMsgSize), grpc.MaxSendMsgSize(MaxMsgSize))
	s.Register(g)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("fakecri: serve on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
		g.Stop()
		<-errc
		return nil
	}
}

// ListenUnix listens on a unix socket given as "unix:///path" or a plain
// path, removing a stale socket file left by an earlier run first.
func ListenUnix(endpoint string) (net.Listener, error) {
	path := strings.TrimPrefix(endpoint, "unix://")
	if path == "" || !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("fakecri: endpoint %q: want unix:///absolute/path", endpoint)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("fakecri: endpoint %q: %s exists and is not a socket", endpoint, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("fakecri: remove stale socket: %w", err)
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("fakecri: listen on %q: %w", endpoint, err)
	}
	return lis, nil
}

// Version implements RuntimeServiceServer.
func (s *Server) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return s.rs.Version(ctx, req.GetVersion())
}

// RunPodSandbox implements RuntimeServiceServer.
func (s *Server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	id, err := s.rs.RunPodSandbox(ctx, req.GetConfig(), req.GetRuntimeHandler())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// StopPodSandbox implements RuntimeServiceServer.
func (s *Server) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	return &runtimeapi.StopPodSandboxResponse{}, s.rs.StopPodSandbox(ctx, req.GetPodSandboxId())
}

// RemovePodSandbox implements RuntimeServiceServer.
func (s *Server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	return &runtimeapi.RemovePodSandboxResponse{}, s.rs.RemovePodSandbox(ctx, req.GetPodSandboxId())
}

// PodSandboxStatus implements RuntimeServiceServer.
func (s *Server) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	return s.rs.PodSandboxStatus(ctx, req.GetPodSandboxId(), req.GetVerbose())
}

// ListPodSandbox implements RuntimeServiceServer.
func (s *Server) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	items, err := s.rs.ListPodSandbox(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

// StreamPodSandboxes implements RuntimeServiceServer.
func (s *Server) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, st grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
	items, err := s.rs.ListPodSandbox(st.Context(), req.GetFilter())
	return sendBatches(items, err, st, func(b []*runtimeapi.PodSandbox) *runtimeapi.StreamPodSandboxesResponse {
		return &runtimeapi.StreamPodSandboxesResponse{PodSandboxes: b}
	})
}

// CreateContainer implements RuntimeServiceServer.
func (s *Server) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	id, err := s.rs.CreateContainer(ctx, req.GetPodSandboxId(), req.GetConfig(), req.GetSandboxConfig())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// StartContainer implements RuntimeServiceServer.
func (s *Server) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	return &runtimeapi.StartContainerResponse{}, s.rs.StartContainer(ctx, req.GetContainerId())
}

// StopContainer implements RuntimeServiceServer.
func (s *Server) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return &runtimeapi.StopContainerResponse{}, s.rs.StopContainer(ctx, req.GetContainerId(), req.GetTimeout())
}

// RemoveContainer implements RuntimeServiceServer.
func (s *Server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	return &runtimeapi.RemoveContainerResponse{}, s.rs.RemoveContainer(ctx, req.GetContainerId())
}

// ListContainers implements RuntimeServiceServer.
func (s *Server) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	items, err := s.rs.ListContainers(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainersResponse{Containers: items}, nil
}

// StreamContainers implements RuntimeServiceServer.
func (s *Server) StreamContainers(req *runtimeapi.StreamContainersRequest, st grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	items, err := s.rs.ListContainers(st.Context(), req.GetFilter())
	return sendBatches(items, err, st, func(b []*runtimeapi.Container) *runtimeapi.StreamContainersResponse {
		return &runtimeapi.StreamContainersResponse{Containers: b}
	})
}

// ContainerStatus implements RuntimeServiceServer.
func (s *Server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return s.rs.ContainerStatus(ctx, req.GetContainerId(), req.GetVerbose())
}

// UpdateContainerResources implements RuntimeServiceServer.
func (s *Server) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	res := &runtimeapi.ContainerResources{Linux: req.GetLinux(), Windows: req.GetWindows()}
	return &runtimeapi.UpdateContainerResourcesResponse{}, s.rs.UpdateContainerResources(ctx, req.GetContainerId(), res)
}

// ReopenContainerLog implements RuntimeServiceServer.
func (s *Server) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	return &runtimeapi.ReopenContainerLogResponse{}, s.rs.ReopenContainerLog(ctx, req.GetContainerId())
}

// ExecSync implements RuntimeServiceServer. An exit error from the
// interface becomes the response's exit code.
func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	stdout, stderr, err := s.rs.ExecSync(ctx, req.GetContainerId(), req.GetCmd(), time.Duration(req.GetTimeout())*time.Second)
	var exitErr utilexec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return nil, err
	}
	resp := &runtimeapi.ExecSyncResponse{Stdout: stdout, Stderr: stderr}
	if exitErr != nil {
		resp.ExitCode = int32(exitErr.ExitStatus())
	}
	return resp, nil
}

// Exec implements RuntimeServiceServer.
func (s *Server) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return s.rs.Exec(ctx, req)
}

// Attach implements RuntimeServiceServer.
func (s *Server) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return s.rs.Attach(ctx, req)
}

// PortForward implements RuntimeServiceServer.
func (s *Server) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return s.rs.PortForward(ctx, req)
}

// ContainerStats implements RuntimeServiceServer.
func (s *Server) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	st, err := s.rs.ContainerStats(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: st}, nil
}

// ListContainerStats implements RuntimeServiceServer.
func (s *Server) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	st, err := s.rs.ListContainerStats(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: st}, nil
}

// StreamContainerStats implements RuntimeServiceServer.
func (s *Server) StreamContainerStats(req *runtimeapi.StreamContainerStatsRequest, st grpc.ServerStreamingServer[runtimeapi.StreamContainerStatsResponse]) error {
	items, err := s.rs.ListContainerStats(st.Context(), req.GetFilter())
	return sendBatches(items, err, st, func(b []*runtimeapi.ContainerStats) *runtimeapi.StreamContainerStatsResponse {
		return &runtimeapi.StreamContainerStatsResponse{ContainerStats: b}
	})
}

// PodSandboxStats implements RuntimeServiceServer.
func (s *Server) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	st, err := s.rs.PodSandboxStats(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: st}, nil
}

// ListPodSandboxStats implements RuntimeServiceServer.
func (s *Server) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	st, err := s.rs.ListPodSandboxStats(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: st}, nil
}

// StreamPodSandboxStats implements RuntimeServiceServer.
func (s *Server) StreamPodSandboxStats(req *runtimeapi.StreamPodSandboxStatsRequest, st grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxStatsResponse]) error {
	items, err := s.rs.ListPodSandboxStats(st.Context(), req.GetFilter())
	return sendBatches(items, err, st, func(b []*runtimeapi.PodSandboxStats) *runtimeapi.StreamPodSandboxStatsResponse {
		return &runtimeapi.StreamPodSandboxStatsResponse{PodSandboxStats: b}
	})
}

// UpdateRuntimeConfig implements RuntimeServiceServer.
func (s *Server) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, s.rs.UpdateRuntimeConfig(ctx, req.GetRuntimeConfig())
}

// Status implements RuntimeServiceServer.
func (s *Server) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return s.rs.Status(ctx, req.GetVerbose())
}

// RuntimeConfig implements RuntimeServiceServer.
func (s *Server) RuntimeConfig(ctx context.Context, _ *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return s.rs.RuntimeConfig(ctx)
}

// CheckpointContainer implements RuntimeServiceServer.
func (s *Server) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	return &runtimeapi.CheckpointContainerResponse{}, s.rs.CheckpointContainer(ctx, req)
}

// CheckpointPod implements RuntimeServiceServer.
func (s *Server) CheckpointPod(ctx context.Context, req *runtimeapi.CheckpointPodRequest) (*runtimeapi.CheckpointPodResponse, error) {
	return &runtimeapi.CheckpointPodResponse{}, s.rs.CheckpointPod(ctx, req)
}

// RestorePod implements RuntimeServiceServer.
func (s *Server) RestorePod(ctx context.Context, req *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return s.rs.RestorePod(ctx, req)
}

// UpdatePodSandboxResources implements RuntimeServiceServer.
func (s *Server) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return s.rs.UpdatePodSandboxResources(ctx, req)
}

// GetContainerEvents implements RuntimeServiceServer: it forwards the
// events the interface delivers until the client goes away.
func (s *Server) GetContainerEvents(_ *runtimeapi.GetEventsRequest, st grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, 64)
	errc := make(chan error, 1)
	go func() { errc <- s.rs.GetContainerEvents(ctx, ch, nil) }()
	for {
		select {
		case ev := <-ch:
			if err := st.Send(ev); err != nil {
				cancel()
				<-errc
				return err
			}
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// ListMetricDescriptors implements RuntimeServiceServer.
func (s *Server) ListMetricDescriptors(ctx context.Context, _ *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	d, err := s.rs.ListMetricDescriptors(ctx)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListMetricDescriptorsResponse{Descriptors: d}, nil
}

// ListPodSandboxMetrics implements RuntimeServiceServer.
func (s *Server) ListPodSandboxMetrics(ctx context.Context, _ *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	m, err := s.rs.ListPodSandboxMetrics(ctx)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxMetricsResponse{PodMetrics: m}, nil
}

// StreamPodSandboxMetrics implements RuntimeServiceServer.
func (s *Server) StreamPodSandboxMetrics(_ *runtimeapi.StreamPodSandboxMetricsRequest, st grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxMetricsResponse]) error {
	items, err := s.rs.ListPodSandboxMetrics(st.Context())
	return sendBatches(items, err, st, func(b []*runtimeapi.PodSandboxMetrics) *runtimeapi.StreamPodSandboxMetricsResponse {
		return &runtimeapi.StreamPodSandboxMetricsResponse{PodSandboxMetrics: b}
	})
}

// ListImages implements ImageServiceServer.
func (s *Server) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	imgs, err := s.is.ListImages(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListImagesResponse{Images: imgs}, nil
}

// StreamImages implements ImageServiceServer.
func (s *Server) StreamImages(req *runtimeapi.StreamImagesRequest, st grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	items, err := s.is.ListImages(st.Context(), req.GetFilter())
	return sendBatches(items, err, st, func(b []*runtimeapi.Image) *runtimeapi.StreamImagesResponse {
		return &runtimeapi.StreamImagesResponse{Images: b}
	})
}

// ImageStatus implements ImageServiceServer.
func (s *Server) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	return s.is.ImageStatus(ctx, req.GetImage(), req.GetVerbose())
}

// PullImage implements ImageServiceServer.
func (s *Server) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref, err := s.is.PullImage(ctx, req.GetImage(), req.GetAuth(), req.GetSandboxConfig())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PullImageResponse{ImageRef: ref}, nil
}

// RemoveImage implements ImageServiceServer.
func (s *Server) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	return &runtimeapi.RemoveImageResponse{}, s.is.RemoveImage(ctx, req.GetImage())
}

// ImageFsInfo implements ImageServiceServer.
func (s *Server) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return s.is.ImageFsInfo(ctx)
}

// sendBatches sends a listed slice as messages of streamBatch items.
func sendBatches[T any, R any](items []T, err error, st grpc.ServerStreamingServer[R], wrap func([]T) *R) error {
	if err != nil {
		return err
	}
	for len(items) > 0 {
		n := min(len(items), streamBatch)
		if err := st.Send(wrap(items[:n])); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}
