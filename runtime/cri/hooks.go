package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/internal/httpget"
	"github.com/nodekit/nodekit/internal/podutil"
)

// Hook reasons, the kubelet's.
const (
	ReasonPostStartHookError  = "PostStartHookError"
	reasonFailedPostStartHook = "FailedPostStartHook"
	reasonFailedPreStopHook   = "FailedPreStopHook"
	// hookBodyLimit bounds how much of an HTTP hook's answer is read.
	hookBodyLimit = 10 << 10
)

// runHook runs a lifecycle handler for a container: exec through the
// runtime, an HTTP GET to the pod (or the handler's host), or a sleep. It
// blocks until the handler ends or ctx does.
func (r *Runtime) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, h *v1.LifecycleHandler, podIPs []string) error {
	switch {
	case h.Exec != nil:
		stdout, stderr, err := r.rs.ExecSync(ctx, containerID, h.Exec.Command, 0)
		var exitErr utilexec.ExitError
		if errors.As(err, &exitErr) {
			return fmt.Errorf("command %q exited with %d: %s", strings.Join(h.Exec.Command, " "), exitErr.ExitStatus(), strings.TrimSpace(string(stdout)+string(stderr)))
		}
		if err != nil {
			return fmt.Errorf("command %q: %w", strings.Join(h.Exec.Command, " "), wrap("ExecSync", containerID, err))
		}
		return nil
	case h.HTTPGet != nil:
		return r.httpHook(ctx, pod, c, h.HTTPGet, podIPs)
	case h.Sleep != nil:
		t := r.cfg.Clock.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case h.TCPSocket != nil:
		// Deprecated and never run by the kubelet.
		return nil
	}
	return errors.New("the handler has no action")
}

func (r *Runtime) httpHook(ctx context.Context, pod *v1.Pod, c *v1.Container, g *v1.HTTPGetAction, podIPs []string) error {
	ips := podIPs
	if pod.Spec.HostNetwork {
		ips = r.cfg.NodeIPs
	}
	host := first(ips)
	if host == "" {
		host = "127.0.0.1"
	}
	port, err := podutil.ResolvePort(g.Port, c)
	if err != nil {
		return err
	}
	req, err := httpget.NewRequest(ctx, g, host, port, "kube-lifecycle/1.37")
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: r.hookTransport}).Do(req)
	if err != nil {
		return fmt.Errorf("HTTP lifecycle hook (%s) failed: %w", g.Path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, hookBodyLimit))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP lifecycle hook (%s) failed with status %d: %s", g.Path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
