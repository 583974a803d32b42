package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// minGracePeriod is the shortest grace period the spec can give a
// container (the kubelet's); an explicit override may be shorter.
const minGracePeriod = 2

// KillPod implements runtime.Runtime. Regular, init and ephemeral
// containers are stopped in parallel; then sidecars (restartable init
// containers) one at a time in reverse start order, so they outlive what
// they serve; then every sandbox. Each container gets the pod's grace
// period, less the time its preStop hook took. When runningPod is nil the
// pod's sandboxes and containers are looked up by the pod's UID.
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
	return r.killPod(ctx, pod, runningPod, gracePeriodOverride)
}

func (r *Runtime) findPod(ctx context.Context, uid types.UID) (*runtime.Pod, error) {
	pods, err := r.GetPods(ctx, true)
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
	var regular []*runtime.Container
	sidecars := map[string]*runtime.Container{}
	for _, c := range running.Containers {
		if c.State == runtime.ContainerStateExited {
			continue
		}
		if pod != nil {
			if spec := findInit(pod, c.Name); spec != nil && IsRestartableInit(spec) {
				sidecars[c.Name] = c
				continue
			}
		}
		regular = append(regular, c)
	}

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, c := range regular {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.guard(running.FullName(), running.ID, c.ID.ID, "kill container "+c.Name, func() error { return r.killContainer(ctx, pod, c.ID.ID, c.Name, override, nil) }); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if pod != nil {
		for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
			if c := sidecars[pod.Spec.InitContainers[i].Name]; c != nil {
				if err := r.killContainer(ctx, pod, c.ID.ID, c.Name, override, nil); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cri: kill pod %s: %w", running.FullName(), err)
	}
	for _, s := range running.Sandboxes {
		if err := r.rs.StopPodSandbox(ctx, s.ID.ID); err != nil && !isNotFound(err) {
			return fmt.Errorf("cri: kill pod %s: %w", running.FullName(), wrap("StopPodSandbox", s.ID.ID, err))
		}
	}
	r.log.V(2).Info("killed pod", "pod", running.FullName(), "podUID", running.ID)
	return nil
}

func findInit(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// killContainer stops one container. The grace period is the pod's
// deletion grace period, else the spec's, else the one recorded on the
// container (for orphans), else 30 s. The preStop hook (from the spec, or
// recorded on the container) runs first and uses up part of it; what is
// left is at least 2 s. An override can only shorten the result. A
// container that is already gone is not an error.
func (r *Runtime) killContainer(ctx context.Context, pod *v1.Pod, id, name string, override *int64, podIPs []string) error {
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
	if grace < minGracePeriod {
		grace = minGracePeriod
	}
	if override != nil && *override < grace {
		grace = max(*override, 0)
	}
	return r.stopContainer(ctx, id, name, grace)
}

func (r *Runtime) stopContainer(ctx context.Context, id, name string, grace int64) error {
	if err := r.rs.StopContainer(ctx, id, grace); err != nil && !isNotFound(err) {
		return fmt.Errorf("stop container %q: %w", name, wrap("StopContainer", id, err))
	}
	return nil
}
