package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/criclient"
)

var _ runtime.GarbageCollector = (*Runtime)(nil)

type deadContainer struct {
	id        string
	pod       types.UID
	name      string
	createdAt int64
}

// GarbageCollect implements runtime.GarbageCollector with the kubelet's
// container GC: per pod and container name the MaxPerPodContainer newest
// dead instances older than MinAge are kept; then, if the node holds more
// than MaxContainers dead containers, each pod-container keeps an equal
// share, and the oldest beyond the limit go. All dead containers of gone
// pods go. A removed container's log file is deleted. Sandboxes that are
// not ready and hold no containers are removed, except each live pod's
// newest; the log directory of a gone pod goes with its last sandbox.
// Paths built from what the runtime reports (a sandbox's namespace, name
// and UID; a container's log path) are removed only when they lie under
// Config.PodLogsDir, symlinks resolved; anything else is left and logged.
func (r *Runtime) GarbageCollect(ctx context.Context, policy runtime.GCPolicy, podGone func(types.UID) bool) error {
	// In brief: a collection that finds nothing to remove, the usual
	// case, decodes no label map.
	containers, err := criclient.ListContainersBrief(ctx, r.rs, nil, r.uidKeys, nil)
	if err != nil {
		return fmt.Errorf("cri: garbage collect: %w", err)
	}
	now := r.cfg.Clock.Now().UnixNano()
	units := map[string][]deadContainer{}
	live := map[string]int{} // containers (dead or alive) per sandbox
	for _, c := range containers {
		live[c.PodSandboxID]++
		uid := podUIDOf(c.Labels)
		if uid == "" || c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if policy.MinAge > 0 && now-c.CreatedAt < policy.MinAge.Nanoseconds() {
			continue
		}
		d := deadContainer{id: c.ID, pod: uid, name: c.Name, createdAt: c.CreatedAt}
		key := string(uid) + "/" + d.name
		units[key] = append(units[key], d)
	}
	for _, u := range units {
		sort.Slice(u, func(i, j int) bool { return u[i].createdAt > u[j].createdAt }) // newest first
	}

	var remove []deadContainer
	for key, u := range units {
		if podGone != nil && podGone(u[0].pod) {
			remove = append(remove, u...)
			delete(units, key)
		}
	}
	enforce := func(keep int) {
		for key, u := range units {
			if keep >= 0 && len(u) > keep {
				remove = append(remove, u[keep:]...)
				units[key] = u[:keep]
			}
		}
	}
	enforce(policy.MaxPerPodContainer)
	if policy.MaxContainers >= 0 {
		total := 0
		for _, u := range units {
			total += len(u)
		}
		if total > policy.MaxContainers && len(units) > 0 {
			enforce(max(policy.MaxContainers/len(units), 1))
			var rest []deadContainer
			for _, u := range units {
				rest = append(rest, u...)
			}
			if len(rest) > policy.MaxContainers {
				sort.Slice(rest, func(i, j int) bool { return rest[i].createdAt < rest[j].createdAt }) // oldest first
				remove = append(remove, rest[:len(rest)-policy.MaxContainers]...)
			}
		}
	}

	var errs []error
	sort.Slice(remove, func(i, j int) bool { return remove[i].createdAt < remove[j].createdAt })
	removed := map[string]bool{}
	for _, d := range remove {
		if err := r.removeContainer(ctx, d.id); err != nil {
			errs = append(errs, err)
			continue
		}
		removed[d.id] = true
	}
	for _, c := range containers {
		if removed[c.ID] {
			live[c.PodSandboxID]--
		}
	}
	if err := r.gcSandboxes(ctx, live, podGone); err != nil {
		errs = append(errs, err)
	}
	if err := r.gcPodCgroups(ctx, podGone); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// podUIDOf is the pod UID of a brief list item read with uidKeys; none
// from a lister that answered without it.
func podUIDOf(labels []string) types.UID {
	if len(labels) == 0 {
		return ""
	}
	return types.UID(labels[0])
}

// gcPodCgroups removes the cgroups of pods that are gone and have no
// sandbox left, as the kubelet removes orphaned pod cgroups, and writes
// the QoS tiers' shares again if a write failed (the kubelet rewrites
// them every minute).
func (r *Runtime) gcPodCgroups(ctx context.Context, podGone func(types.UID) bool) error {
	if r.cgroups == nil || podGone == nil {
		return nil
	}
	r.retryQoS()
	uids, err := r.podCgroupUIDs()
	if err != nil {
		return fmt.Errorf("cri: garbage collect: pod cgroups: %w", err)
	}
	var errs []error
	for _, uid := range uids {
		if !podGone(uid) {
			continue
		}
		sel := map[string]string{LabelPodUID: string(uid)}
		left, err := r.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
		if err != nil || len(left) > 0 {
			continue
		}
		r.forgetActuated(uid, nil)
		if err := r.removePodCgroups(uid); err != nil {
			errs = append(errs, fmt.Errorf("cri: garbage collect: %w", err))
		}
	}
	return errors.Join(errs...)
}

// removeContainer deletes the container's log file, then the container.
// A log path that does not lie under Config.PodLogsDir is left alone and
// logged: the runtime's answer is not trusted with the node's files.
func (r *Runtime) removeContainer(ctx context.Context, id string) error {
	if st, err := r.rs.ContainerStatus(ctx, id, false); err == nil {
		if p := st.GetStatus().GetLogPath(); p != "" {
			if err := underDir(r.cfg.PodLogsDir, p, 2); err != nil {
				r.log.Info("not removing a container log outside the pod logs directory", "containerID", id, "path", p, "err", err)
			} else if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				r.log.V(2).Info("removing a container log failed", "containerID", id, "err", err)
			}
		}
	}
	if err := r.rs.RemoveContainer(ctx, id); err != nil && !criclient.IsNotFound(err) {
		return fmt.Errorf("cri: garbage collect: %w", criclient.Wrap("RemoveContainer", id, err))
	}
	return nil
}

func (r *Runtime) gcSandboxes(ctx context.Context, live map[string]int, podGone func(types.UID) bool) error {
	sandboxes, err := criclient.ListPodSandboxBrief(ctx, r.rs, nil, r.uidKeys, nil)
	if err != nil {
		return fmt.Errorf("cri: garbage collect: %w", err)
	}
	byPod := map[types.UID][]criclient.BriefSandbox{}
	for _, s := range sandboxes {
		if uid := podUIDOf(s.Labels); uid != "" {
			byPod[uid] = append(byPod[uid], s)
		}
	}
	var errs []error
	for uid, list := range byPod {
		sort.Slice(list, func(i, j int) bool { return list[i].CreatedAt > list[j].CreatedAt })
		gone := podGone != nil && podGone(uid)
		if gone {
			r.hashes.forget(uid)
		}
		left := len(list)
		for i, s := range list {
			if (!gone && i == 0) || s.State == runtimeapi.PodSandboxState_SANDBOX_READY || live[s.ID] > 0 {
				continue
			}
			if err := r.rs.RemovePodSandbox(ctx, s.ID); err != nil && !criclient.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("cri: garbage collect: %w", criclient.Wrap("RemovePodSandbox", s.ID, err)))
				continue
			}
			left--
		}
		if gone && left == 0 {
			m := list[0]
			name := m.Namespace + "_" + m.Name + "_" + string(uid)
			dir := filepath.Join(r.cfg.PodLogsDir, name)
			if err := underDir(r.cfg.PodLogsDir, dir, 1); err != nil || strings.ContainsRune(name, '/') {
				r.log.Info("not removing a pod log directory outside the pod logs directory", "pod", m.Namespace+"/"+m.Name, "podUID", uid, "path", dir, "err", err)
				continue
			}
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("cri: garbage collect: remove pod logs: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// underDir checks that p lies depth levels below root, a pod logs
// directory (1: a pod's log directory; 2: a log file in a container's
// directory within it, or deeper), lexically and once the symlinks of its
// parent are resolved. GC and log rotation check the runtime's paths
// with it before they remove or rename anything.
func underDir(root, p string, depth int) error {
	root = filepath.Clean(root)
	if !filepath.IsAbs(p) {
		return fmt.Errorf("%q is not absolute", p)
	}
	rel, err := filepath.Rel(root, filepath.Clean(p))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%q is not under %s", p, root)
	}
	if n := strings.Count(rel, "/") + 1; n < depth {
		return fmt.Errorf("%q is not %d levels under %s", p, depth, root)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	realParent, err := filepath.EvalSymlinks(filepath.Dir(filepath.Clean(p)))
	if os.IsNotExist(err) {
		return nil // nothing there to remove
	}
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(realRoot, realParent); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%q resolves outside %s", p, root)
	}
	return nil
}
