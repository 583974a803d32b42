package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/internal/httpget"
	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// Hook reasons, the kubelet's.
const (
	ReasonPostStartHookError  = "PostStartHookError"
	reasonFailedPostStartHook = "FailedPostStartHook"
	reasonFailedPreStopHook   = "FailedPreStopHook"
	// reasonLifecycleHTTPFallback: an HTTPS hook succeeded over HTTP.
	reasonLifecycleHTTPFallback = "LifecycleHTTPFallback"
	// hookUserAgent is sent with HTTP hooks unless the hook sets one.
	hookUserAgent = "kube-lifecycle/1.37"
	// hookBodyLimit bounds how much of an HTTP hook's answer is read.
	hookBodyLimit = 10 << 10
)

// AnnotationContainerPorts records a container's ports (JSON), so the
// named port of an orphan's HTTP preStop hook still resolves: the
// kubelet's key.
const AnnotationContainerPorts = "io.kubernetes.container.ports"

// errHookTimeout is the error of a hook cut off by its time limit.
var errHookTimeout = errors.New("the hook did not finish in time")

// runHook runs a postStart hook. As with the kubelet it has no time limit
// of its own: it runs until it ends or ctx does (a kill of the pod
// cancels the sync's context).
func (r *Runtime) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, h *v1.LifecycleHandler, podIPs []string) error {
	return r.runHookWithin(ctx, pod, c, containerID, h, podIPs, 0)
}

// runPreStop runs a preStop hook for at most grace seconds, the time the
// kubelet waits for it. An exec hook also gets grace as its exec timeout,
// so the runtime ends the command then.
func (r *Runtime) runPreStop(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, h *v1.LifecycleHandler, podIPs []string, grace int64) error {
	return r.runHookWithin(ctx, pod, c, containerID, h, podIPs, time.Duration(grace)*time.Second)
}

// runHookWithin runs a lifecycle handler for a container on its own
// goroutine (exec through the runtime, an HTTP GET to the pod or the
// handler's host, or a sleep) and waits for it, for at most limit on the
// clock when limit > 0, or until ctx ends. On either, the handler's
// context is cancelled and the hook's error is returned at once. A panic
// in the handler becomes its error. pod is nil for an orphan: a container
// whose pod spec is gone, whose hook runs from what was recorded on it.
func (r *Runtime) runHookWithin(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, h *v1.LifecycleHandler, podIPs []string, limit time.Duration) error {
	if h.Sleep != nil {
		return r.sleepHook(ctx, h.Sleep, limit)
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ref string
	var uid types.UID
	if pod != nil {
		ref, uid = podRef(pod), pod.UID
	}
	done := make(chan error, 1) // the goroutine never blocks on send
	go func() {
		done <- r.guard(ref, uid, containerID, "lifecycle hook", func() error {
			return r.handle(hctx, pod, c, containerID, h, podIPs, limit)
		})
	}()
	var expired <-chan time.Time
	if limit > 0 {
		t := r.cfg.Clock.NewTimer(limit)
		defer t.Stop()
		expired = t.C()
	}
	select {
	case err := <-done:
		return err
	case <-expired:
		return fmt.Errorf("%w: cut off after %s", errHookTimeout, limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// guard runs f and turns a panic in it into an error for that step, logged
// with the pod, the container and the stack and counted in
// nodekit_runtime_panics_total, so that one pod's bad data cannot take the
// process down.
func (r *Runtime) guard(pod string, uid types.UID, containerID, step string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cri: %s: panic: %v", step, p)
			r.panics.Inc()
			r.log.Error(err, "recovered a panic", "pod", pod, "podUID", uid, "containerID", containerID, "stack", string(debug.Stack()))
		}
	}()
	return f()
}

func (r *Runtime) handle(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, h *v1.LifecycleHandler, podIPs []string, limit time.Duration) error {
	switch {
	case h.Exec != nil:
		stdout, stderr, err := r.rs.ExecSync(ctx, containerID, h.Exec.Command, limit)
		var exitErr utilexec.ExitError
		if errors.As(err, &exitErr) {
			return fmt.Errorf("command %q exited with %d: %s", strings.Join(h.Exec.Command, " "), exitErr.ExitStatus(), strings.TrimSpace(string(stdout)+string(stderr)))
		}
		if err != nil {
			return fmt.Errorf("command %q: %w", strings.Join(h.Exec.Command, " "), criclient.Wrap("ExecSync", containerID, err))
		}
		return nil
	case h.HTTPGet != nil:
		return r.httpHook(ctx, pod, c, containerID, h.HTTPGet, podIPs)
	case h.Sleep != nil:
		return r.sleepHook(ctx, h.Sleep, limit)
	case h.TCPSocket != nil:
		// Deprecated and never run by the kubelet.
		return nil
	}
	return errors.New("the handler has no action")
}

// sleepHook waits on the clock for the sleep's seconds, or limit if that
// is shorter (limit > 0), or until ctx ends. It needs no goroutine, and
// sets a single timer.
func (r *Runtime) sleepHook(ctx context.Context, s *v1.SleepAction, limit time.Duration) error {
	d := time.Duration(s.Seconds) * time.Second
	cut := limit > 0 && limit < d
	if cut {
		d = limit
	}
	t := r.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
		return ctx.Err()
	}
	if cut {
		return fmt.Errorf("%w: cut off after %s", errHookTimeout, limit)
	}
	return nil
}

// hookTarget is what an HTTP hook needs to know of its pod and container.
type hookTarget struct {
	uid         types.UID
	hostNetwork bool
	container   *v1.Container // the name and ports, for a named port
	ips         []string
}

// httpHook sends the hook's GET to the handler's host, else the pod's
// first IP (the node's for a host-network pod). The pod's IPs are those
// the sync saw, else the runtime's for the pod's newest ready sandbox, as
// the kubelet looks them up; a pod without an IP is an error, as with
// the kubelet. The scheme is the handler's (HTTPS without certificate
// checks); redirects are followed only to the same host name. The hook
// fails only when no answer comes, whatever the answer's status code, as
// with the kubelet.
func (r *Runtime) httpHook(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, g *v1.HTTPGetAction, podIPs []string) error {
	t := hookTarget{container: c, ips: podIPs}
	if pod != nil {
		t.uid, t.hostNetwork = pod.UID, pod.Spec.HostNetwork
	} else {
		recorded, err := r.recordedTarget(ctx, c, containerID)
		if err != nil {
			return err
		}
		t.uid, t.container = recorded.uid, recorded.container
	}
	host := g.Host
	if host == "" {
		if len(t.ips) == 0 && !t.hostNetwork {
			ips, hostNetwork, err := r.sandboxIPs(ctx, t.uid)
			if err != nil {
				return err
			}
			t.ips, t.hostNetwork = ips, hostNetwork
		}
		if t.hostNetwork {
			t.ips = r.cfg.NodeIPs
			if len(t.ips) == 0 {
				t.ips = []string{"127.0.0.1"}
			}
		}
		if host = first(t.ips); host == "" {
			return fmt.Errorf("HTTP lifecycle hook (%s): no IP is known for pod %s", g.Path, t.uid)
		}
	}
	port, err := podutil.ResolvePort(g.Port, t.container)
	if err != nil {
		return err
	}
	req, err := httpget.NewRequest(ctx, g, host, port, hookUserAgent)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: r.hookTransport, CheckRedirect: httpget.CheckRedirect}
	err = sendHook(client, req)
	if err != nil && httpAnswerToHTTPS(err) {
		// As the kubelet: an HTTPS hook answered in plain HTTP is sent
		// again over HTTP, without its Authorization header; if that
		// works, the hook succeeded, with a warning.
		retry := req.Clone(ctx)
		retry.URL.Scheme = "http"
		retry.Header.Del("Authorization")
		if sendHook(client, retry) == nil {
			r.log.V(2).Info("HTTPS lifecycle hook got an HTTP answer; the retry over HTTP succeeded", "pod", podRefOrUID(pod, t.uid), "containerID", containerID, "host", req.URL.Host)
			if pod != nil {
				r.cfg.Events(pod, v1.EventTypeWarning, reasonLifecycleHTTPFallback,
					fmt.Sprintf("request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", req.URL.Host))
			}
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("HTTP lifecycle hook (%s) failed: %w", g.Path, err)
	}
	return nil
}

// sendHook sends a hook's request and reads at most hookBodyLimit of the
// answer. As with the kubelet, only a request that gets no answer fails:
// the status code does not matter.
func sendHook(client *http.Client, req *http.Request) error {
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, hookBodyLimit))
	return nil
}

// httpAnswerToHTTPS reports whether err is that of an HTTPS request that
// a plain HTTP server answered; net/http says so only in its message.
func httpAnswerToHTTPS(err error) bool {
	var uerr *url.Error
	return errors.As(err, &uerr) && strings.Contains(uerr.Err.Error(), "server gave HTTP response to HTTPS client")
}

// podRefOrUID names a pod in logs: namespace/name, or its UID for an
// orphan.
func podRefOrUID(pod *v1.Pod, uid types.UID) string {
	if pod != nil {
		return podRef(pod)
	}
	return string(uid)
}

// recordedTarget restores an orphan's pod UID and container ports from
// the labels and annotations written when the container was created.
func (r *Runtime) recordedTarget(ctx context.Context, c *v1.Container, containerID string) (hookTarget, error) {
	resp, err := r.rs.ContainerStatus(ctx, containerID, false)
	if err != nil {
		return hookTarget{}, fmt.Errorf("HTTP lifecycle hook: %w", criclient.Wrap("ContainerStatus", containerID, err))
	}
	st := resp.GetStatus()
	restored := &v1.Container{Name: c.Name}
	if raw := st.GetAnnotations()[AnnotationContainerPorts]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &restored.Ports); err != nil {
			return hookTarget{}, fmt.Errorf("HTTP lifecycle hook: annotation %s of container %s: %v", AnnotationContainerPorts, containerID, err)
		}
	}
	return hookTarget{uid: types.UID(st.GetLabels()[LabelPodUID]), container: restored}, nil
}

// sandboxIPs returns the IPs of the pod's newest ready sandbox and whether it
// shares the node's network.
func (r *Runtime) sandboxIPs(ctx context.Context, uid types.UID) ([]string, bool, error) {
	if uid == "" {
		return nil, false, errors.New("HTTP lifecycle hook: the container records no pod UID")
	}
	list, err := r.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{LabelPodUID: string(uid)},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		return nil, false, fmt.Errorf("HTTP lifecycle hook: %w", criclient.Wrap("ListPodSandbox", string(uid), err))
	}
	if len(list) == 0 {
		return nil, false, nil
	}
	sort.Slice(list, func(i, j int) bool { return list[i].GetCreatedAt() > list[j].GetCreatedAt() })
	resp, err := r.rs.PodSandboxStatus(ctx, list[0].GetId(), false)
	if err != nil {
		return nil, false, fmt.Errorf("HTTP lifecycle hook: %w", criclient.Wrap("PodSandboxStatus", list[0].GetId(), err))
	}
	st, err := criclient.FromSandboxStatus(resp.GetStatus())
	if err != nil {
		return nil, false, fmt.Errorf("HTTP lifecycle hook: %w", err)
	}
	return st.IPs, st.NetworkMode == runtime.NamespaceModeNode, nil
}
