package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// minGracePeriod is the shortest grace period the spec can give a
// container (the kubelet's); an explicit override may be shorter.
const minGracePeriod = 2

// KillPod implements runtime.Runtime. Every container that may still run
// is stopped in parallel, each with the pod's grace period less the time
// its preStop hook took. As in the kubelet, a sidecar (restartable init
// container) then waits for its turn: until the regular containers and
// the sidecars after it have exited, or its grace period is used up. It
// is stopped with what is left (whole seconds, at least 2), so sidecars
// outlive what they serve within one grace period. Then every sandbox is
// stopped. When runningPod is nil the pod's sandboxes and containers are
// looked up by the pod's UID: the list calls filter on its pod UID label,
// so the runtime returns that pod's objects only.
func (r *Runtime) KillPod(ctx context.Context, pod *v1.Pod, runningPod *runtime.Pod, gracePeriodOverride *int64) error {
	if runningPod == nil {
		if pod == nil {
			return fmt.Errorf("cri: kill pod: neither pod nor runningPod given: %w", runtime.ErrInvalidArgument)
		}
		p, err := r.findPod(ctx, pod.UID)
		if err != nil {
			return err
		}
		runningPod = p
	}
	if err := r.killPod(ctx, pod, runningPod, gracePeriodOverride); err != nil {
		return err
	}
	// Nothing of the pod runs any more: its cgroup goes, as the kubelet
	// removes it once the pod is terminated. A failure is logged; the
	// garbage collection tries again.
	r.forgetActuated(runningPod.ID, nil)
	if err := r.removePodCgroups(runningPod.ID); err != nil {
		r.log.V(2).Info("removing a pod cgroup failed", "podUID", runningPod.ID, "err", err)
	}
	return nil
}

// findPod lists the sandboxes and containers that carry the pod's UID
// label, and only those: the runtime filters them, so killing each of
// many pods does not list every pod on the node each time.
func (r *Runtime) findPod(ctx context.Context, uid types.UID) (*runtime.Pod, error) {
	sel := map[string]string{LabelPodUID: string(uid)}
	pods, err := r.listPods(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel}, &runtimeapi.ContainerFilter{LabelSelector: sel}, &podList{})
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.ID == uid {
			return p, nil
		}
	}
	return &runtime.Pod{ID: uid}, nil
}

func (r *Runtime) killPod(ctx context.Context, pod *v1.Pod, running *runtime.Pod, override *int64) error {
	var live []*runtime.Container
	for _, c := range running.Containers {
		if c.State != runtime.ContainerStateExited {
			live = append(live, c)
		}
	}
	order := newStopOrder(pod, live)

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, c := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.guard(running.FullName(), running.ID, c.ID.ID, "kill container "+c.Name, func() error { return r.killContainer(ctx, pod, c.ID.ID, c.Name, override, nil, order) }); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cri: kill pod %s: %w", running.FullName(), err)
	}
	for _, s := range running.Sandboxes {
		if err := r.rs.StopPodSandbox(ctx, s.ID.ID); err != nil && !criclient.IsNotFound(err) {
			return fmt.Errorf("cri: kill pod %s: %w", running.FullName(), criclient.Wrap("StopPodSandbox", s.ID.ID, err))
		}
	}
	r.log.V(2).Info("killed pod", "pod", running.FullName(), "podUID", running.ID)
	return nil
}

// stopOrder makes sidecars wait for their turn while a pod is killed: a
// sidecar waits for every regular container and for the sidecar after it
// (which waits for the one after it, and so on).
type stopOrder struct {
	// exited has one channel per container of the spec, closed once that
	// container has exited (at once for one that is not running).
	exited map[string]chan struct{}
	// before lists, for each sidecar, the channels it waits on.
	before map[string][]chan struct{}
	// mu guards closing the channels of exited.
	mu sync.Mutex
}

// newStopOrder returns the ordering for killing the live containers of
// pod, or nil when the pod has no sidecar (or no spec).
func newStopOrder(pod *v1.Pod, live []*runtime.Container) *stopOrder {
	if pod == nil || !slices.ContainsFunc(pod.Spec.InitContainers, func(c v1.Container) bool { return IsRestartableInit(&c) }) {
		return nil
	}
	isLive := make(map[string]bool, len(live))
	for _, c := range live {
		isLive[c.Name] = true
	}
	o := &stopOrder{exited: map[string]chan struct{}{}, before: map[string][]chan struct{}{}}
	channel := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !isLive[name] {
			close(ch)
		}
		o.exited[name] = ch
		return ch
	}
	var regular []chan struct{}
	for i := range pod.Spec.Containers {
		regular = append(regular, channel(pod.Spec.Containers[i].Name))
	}
	var next chan struct{} // the channel of the sidecar after this one
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		ch := channel(c.Name)
		if !IsRestartableInit(c) {
			continue
		}
		wait := slices.Clone(regular)
		if next != nil {
			wait = append(wait, next)
		}
		o.before[c.Name] = wait
		next = ch
	}
	return o
}

// waitForTurn blocks until the named container may be stopped, for at
// most grace seconds, and returns how long it waited.
func (o *stopOrder) waitForTurn(ctx context.Context, clk clock.Clock, name string, grace int64) time.Duration {
	if o == nil || grace <= 0 || len(o.before[name]) == 0 {
		return 0
	}
	start := clk.Now()
	t := clk.NewTimer(time.Duration(grace) * time.Second)
	defer t.Stop()
	for _, ch := range o.before[name] {
		select {
		case <-ch:
		case <-t.C():
			return clk.Since(start)
		case <-ctx.Done():
			return clk.Since(start)
		}
	}
	return clk.Since(start)
}

// stopped records that the named container has exited.
func (o *stopOrder) stopped(name string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.exited[name]; ok {
		close(ch)
		delete(o.exited, name)
	}
}

// killContainer stops one container. The grace period is the pod's
// deletion grace period, else the spec's, else the one recorded on the
// container (for orphans), else 30 s. The preStop hook (from the spec, or
// recorded on the container) runs first and uses up part of it; with an
// order, the wait for the container's turn uses up more; what is left is
// at least 2 s. An override can only shorten the result. A container that
// is already gone is not an error.
func (r *Runtime) killContainer(ctx context.Context, pod *v1.Pod, id, name string, override *int64, podIPs []string, order *stopOrder) error {
	grace := int64(defaultGracePeriod)
	var spec *v1.Container
	var preStop *v1.LifecycleHandler
	switch {
	case pod != nil:
		if pod.DeletionGracePeriodSeconds != nil {
			grace = *pod.DeletionGracePeriodSeconds
		} else if pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = *pod.Spec.TerminationGracePeriodSeconds
		}
		if spec = findContainer(pod, name); spec != nil && spec.Lifecycle != nil {
			preStop = spec.Lifecycle.PreStop
		}
	default:
		if st, err := r.rs.ContainerStatus(ctx, id, false); err == nil {
			a := st.GetStatus().GetAnnotations()
			if g, ok := parseGrace(a); ok {
				grace = g
			}
			if raw := a[AnnotationPreStopHandler]; raw != "" {
				var h v1.LifecycleHandler
				if json.Unmarshal([]byte(raw), &h) == nil {
					preStop = &h
				}
			}
		}
		spec = &v1.Container{Name: name}
	}
	if override != nil && *override < grace {
		grace = max(*override, 0)
	}
	if preStop != nil && grace > 0 {
		start := r.cfg.Clock.Now()
		err := r.runPreStop(ctx, pod, spec, id, preStop, podIPs, grace)
		if err != nil {
			msg := fmt.Sprintf("PreStopHook failed: %v", err)
			r.log.V(2).Info("preStop hook failed", "container", name, "containerID", id, "err", err)
			if pod != nil {
				r.cfg.Events(pod, v1.EventTypeWarning, reasonFailedPreStopHook, msg)
			}
		}
		grace -= int64(r.cfg.Clock.Since(start).Seconds())
	}
	if grace > 0 {
		// Whole seconds, rounded down, as the kubelet counts the wait.
		grace -= int64(order.waitForTurn(ctx, r.cfg.Clock, name, grace).Seconds())
	}
	if grace < minGracePeriod {
		grace = minGracePeriod
	}
	if override != nil && *override < grace {
		grace = max(*override, 0)
	}
	if err := r.stopContainer(ctx, id, name, grace); err != nil {
		return err
	}
	order.stopped(name)
	return nil
}

func (r *Runtime) stopContainer(ctx context.Context, id, name string, grace int64) error {
	if err := r.rs.StopContainer(ctx, id, grace); err != nil && !criclient.IsNotFound(err) {
		return fmt.Errorf("stop container %q: %w", name, criclient.Wrap("StopContainer", id, err))
	}
	return nil
}
