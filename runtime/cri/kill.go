package cri

import (
	"context"
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

// KillPod implements runtime.Runtime. Containers are stopped in parallel,
// each with the pod's grace period, then every sandbox is stopped. When
// runningPod is nil the pod's sandboxes and containers are looked up by
// the pod's UID.
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
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, c := range running.Containers {
		if c.State == runtime.ContainerStateExited {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.killContainer(ctx, pod, c.ID.ID, c.Name, override); err != nil {
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
		if err := r.rs.StopPodSandbox(ctx, s.ID.ID); err != nil && !isNotFound(err) {
			return fmt.Errorf("cri: kill pod %s: %w", running.FullName(), wrap("StopPodSandbox", s.ID.ID, err))
		}
	}
	r.log.V(2).Info("killed pod", "pod", running.FullName(), "podUID", running.ID)
	return nil
}

// killContainer stops one container with the grace period the pod spec
// (or, without a spec, the container's annotations) gives, shortened or
// lengthened by override. A container that is already gone is not an
// error.
func (r *Runtime) killContainer(ctx context.Context, pod *v1.Pod, id, name string, override *int64) error {
	grace := int64(defaultGracePeriod)
	switch {
	case pod != nil && pod.DeletionGracePeriodSeconds != nil:
		grace = *pod.DeletionGracePeriodSeconds
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = *pod.Spec.TerminationGracePeriodSeconds
	case pod == nil:
		if st, err := r.rs.ContainerStatus(ctx, id, false); err == nil {
			if g, ok := parseGrace(st.GetStatus().GetAnnotations()); ok {
				grace = g
			}
		}
	}
	if grace < minGracePeriod {
		grace = minGracePeriod
	}
	if override != nil {
		grace = max(*override, 0)
	}
	if err := r.rs.StopContainer(ctx, id, grace); err != nil && !isNotFound(err) {
		return fmt.Errorf("stop container %q: %w", name, wrap("StopContainer", id, err))
	}
	return nil
}
