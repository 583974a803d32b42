package fakecri

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// ExecSync implements RuntimeService. The result comes from the
// container's script (Behavior.Exec, FAKECRI_EXEC), the built-in commands
// echo, true, false and env, or the script's default exit code. A non-zero
// exit code is returned as a k8s.io/utils/exec.CodeExitError alongside the
// output, as the upstream CRI client returns it. A scripted delay longer
// than timeout fails with DeadlineExceeded.
func (r *Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	r.mu.Lock()
	if err := r.enter("ExecSync"); err != nil {
		r.mu.Unlock()
		return nil, nil, err
	}
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		r.mu.Unlock()
		return nil, nil, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return nil, nil, errorf(codes.Unknown, "failed to exec in container: container is in %s state", c.state)
	}
	res := c.behavior.exec(cmd, c.config.GetEnvs())
	r.mu.Unlock()

	if d := time.Duration(res.Delay); d > 0 {
		if timeout > 0 && d > timeout {
			d = timeout
		}
		t := r.clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
			return nil, nil, status.FromContextError(ctx.Err()).Err()
		}
		if timeout > 0 && time.Duration(res.Delay) > timeout {
			return nil, nil, errorf(codes.DeadlineExceeded, "timeout %s exceeded: context deadline exceeded", timeout)
		}
	}
	var exitErr error
	if res.ExitCode != 0 {
		exitErr = utilexec.CodeExitError{
			Err:  fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), res.ExitCode, res.Stderr),
			Code: int(res.ExitCode),
		}
	}
	return []byte(res.Stdout), []byte(res.Stderr), exitErr
}
