package fakecri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// StreamingServer serves the streaming sessions of Exec, Attach and
// PortForward (k8s.io/cri-streaming, SPDY) for one Runtime.
type StreamingServer struct {
	r    *Runtime
	lis  net.Listener
	srv  streaming.Server
	sess *streamSessions
}

// NewStreamingServer makes r answer Exec, Attach and PortForward with
// URLs on lis, at once; Run serves them. Without a streaming server those
// calls fail with Unimplemented. Call Run, which alone releases lis and
// the registration. It fails when r has a streaming server already.
//
// What a session does is scripted like ExecSync:
//   - exec of "cat" copies stdin to stdout until stdin closes; any other
//     command writes its ExecSync result (Behavior.Exec, the built-ins,
//     the default exit code) to stdout and stderr and exits with its code,
//     after its Delay on the runtime's clock;
//   - attach copies stdin to stdout, as a console that echoes, until
//     stdin closes;
//   - port-forward answers every port with an echo: what the client
//     sends on a connection comes back on it.
func (r *Runtime) NewStreamingServer(lis net.Listener) (*StreamingServer, error) {
	sess := &streamSessions{r: r, stop: make(chan struct{})}
	srv, err := streaming.NewServer(streaming.Config{
		Addr:                            lis.Addr().String(),
		BaseURL:                         &url.URL{Scheme: "http", Host: lis.Addr().String()},
		StreamIdleTimeout:               streaming.DefaultConfig.StreamIdleTimeout,
		StreamCreationTimeout:           streaming.DefaultConfig.StreamCreationTimeout,
		SupportedRemoteCommandProtocols: streaming.DefaultConfig.SupportedRemoteCommandProtocols,
		SupportedPortForwardProtocols:   streaming.DefaultConfig.SupportedPortForwardProtocols,
	}, sess)
	if err != nil {
		return nil, fmt.Errorf("fakecri: streaming server: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streaming != nil {
		return nil, errors.New("fakecri: the runtime has a streaming server already")
	}
	r.streaming = srv
	return &StreamingServer{r: r, lis: lis, srv: srv, sess: sess}, nil
}

// The streaming server's bounds on idle connections and on headers.
const (
	streamingIdleTimeout    = 90 * time.Second
	streamingMaxHeaderBytes = 64 << 10
)

// Run serves the sessions until ctx ends. Then it closes the listener,
// makes Exec, Attach and PortForward fail with Unimplemented again, ends
// every session (its client sees the stream end, as when a runtime drops
// it) and returns nil once their goroutines have returned.
func (s *StreamingServer) Run(ctx context.Context) error {
	// No read or write timeout: a session is one long upgraded stream.
	// Idle keep-alive connections are closed, and headers bounded.
	hs := &http.Server{Handler: s.srv, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: streamingIdleTimeout, MaxHeaderBytes: streamingMaxHeaderBytes}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(s.lis) }()
	var serr error
	select {
	case serr = <-done:
	case <-ctx.Done():
		_ = hs.Close()
		serr = <-done
	}
	s.r.mu.Lock()
	s.r.streaming = nil
	s.r.mu.Unlock()
	s.sess.mu.Lock()
	s.sess.stopped = true
	close(s.sess.stop)
	s.sess.mu.Unlock()
	s.sess.wg.Wait()
	if serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("fakecri: streaming server: %w", serr)
	}
	return nil
}

// streamServer returns the streaming server, or Unimplemented.
func (r *Runtime) streamServer(call string) (streaming.Server, error) {
	if r.streaming == nil {
		return nil, errorf(codes.Unimplemented, "fakecri serves no streaming requests (%s) without a streaming server (NewStreamingServer)", call)
	}
	return r.streaming, nil
}

// Exec implements RuntimeService: it returns the URL of the session on
// the streaming server, for a running container; Unimplemented when
// none runs.
func (r *Runtime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("Exec"); err != nil {
		return nil, err
	}
	srv, err := r.streamServer("exec")
	if err != nil {
		return nil, err
	}
	if err := r.runningLocked(req.GetContainerId(), "exec"); err != nil {
		return nil, err
	}
	return srv.GetExec(req)
}

// Attach implements RuntimeService, as Exec.
func (r *Runtime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("Attach"); err != nil {
		return nil, err
	}
	srv, err := r.streamServer("attach")
	if err != nil {
		return nil, err
	}
	if err := r.runningLocked(req.GetContainerId(), "attach"); err != nil {
		return nil, err
	}
	return srv.GetAttach(req)
}

// PortForward implements RuntimeService: the URL of an echo session for
// a ready sandbox on the streaming server; Unimplemented when none
// runs.
func (r *Runtime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("PortForward"); err != nil {
		return nil, err
	}
	sb, _, err := lookup(r.sandboxes, req.GetPodSandboxId(), "sandbox")
	if err != nil {
		return nil, err
	}
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, errorf(codes.FailedPrecondition, "sandbox %s is not ready", req.GetPodSandboxId())
	}
	srv, err := r.streamServer("port-forward")
	if err != nil {
		return nil, err
	}
	return srv.GetPortForward(req)
}

func (r *Runtime) runningLocked(id, call string) error {
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		return err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return errorf(codes.Unknown, "failed to %s in container: container is in %s state", call, c.state)
	}
	return nil
}

// streamSessions runs the sessions of one StreamingServer: each ends when
// its script does, its client goes, or Run ends.
type streamSessions struct {
	r    *Runtime
	stop chan struct{} // closed when Run ends
	wg   sync.WaitGroup

	// mu guards stopped, so that no session is added once wg is waited on.
	mu      sync.Mutex
	stopped bool
}

var _ streaming.Runtime = (*streamSessions)(nil)

// session runs f until it returns, ctx ends or the server stops; closing
// the streams ends the copies f makes.
func (s *streamSessions) session(ctx context.Context, closers []io.Closer, f func() error) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return errors.New("the session was ended by the runtime")
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	case <-s.stop:
	}
	for _, c := range closers {
		if c != nil {
			_ = c.Close()
		}
	}
	<-done
	return errors.New("the session was ended by the runtime")
}

func (s *streamSessions) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan remotecommandserver.TerminalSize) error {
	if strings.Join(cmd, " ") == "cat" {
		return s.echo(ctx, in, out)
	}
	s.r.mu.Lock()
	c, _, err := lookup(s.r.containers, id, "container")
	if err != nil {
		s.r.mu.Unlock()
		return err
	}
	res := c.behavior.exec(cmd, c.config.GetEnvs())
	s.r.mu.Unlock()
	return s.session(ctx, closersOf(in, out, errw), func() error {
		if d := time.Duration(res.Delay); d > 0 {
			t := s.r.clock.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C():
			case <-ctx.Done():
				return ctx.Err()
			case <-s.stop:
				return errors.New("the session was ended by the runtime")
			}
		}
		if out != nil {
			_, _ = io.WriteString(out, res.Stdout)
		}
		if errw != nil {
			_, _ = io.WriteString(errw, res.Stderr)
		}
		if res.ExitCode != 0 {
			return utilexec.CodeExitError{Err: fmt.Errorf("command '%s' exited with %d", strings.Join(cmd, " "), res.ExitCode), Code: int(res.ExitCode)}
		}
		return nil
	})
}

func (s *streamSessions) Attach(ctx context.Context, _ string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommandserver.TerminalSize) error {
	return s.echo(ctx, in, out)
}

func (s *streamSessions) PortForward(ctx context.Context, _ string, _ int32, stream io.ReadWriteCloser) error {
	return s.echo(ctx, stream, stream)
}

// echo copies in to out until in ends.
func (s *streamSessions) echo(ctx context.Context, in io.Reader, out io.Writer) error {
	return s.session(ctx, closersOf(in, out), func() error {
		if in == nil || out == nil {
			return nil
		}
		_, err := io.Copy(out, in)
		return err
	})
}

func closersOf(vs ...any) []io.Closer {
	var out []io.Closer
	for _, v := range vs {
		if c, ok := v.(io.Closer); ok {
			out = append(out, c)
		}
	}
	return out
}
