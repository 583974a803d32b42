package fakecri

import (
	"context"
	"maps"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerStats reports the scripted usage of a running container; CPU
// time accumulates at the scripted rate since the container started. An
// exited container reports zero CPU and memory; its writable layer stays
// until it is removed.
func (r *Runtime) containerStats(c *container) *runtimeapi.ContainerStats {
	now := r.now().UnixNano()
	var mem, cores, cpuTime uint64
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		mem, cores = c.behavior.MemoryBytes, c.behavior.CPUNanoCores
		if elapsed := now - c.startedAt; elapsed > 0 {
			cpuTime = uint64(float64(elapsed) / 1e9 * float64(cores))
		}
	}
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id:          c.id,
			Metadata:    c.config.GetMetadata(),
			Labels:      maps.Clone(c.config.GetLabels()),
			Annotations: maps.Clone(c.config.GetAnnotations()),
		},
		Cpu: &runtimeapi.CpuUsage{
			Timestamp:            now,
			UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpuTime},
			UsageNanoCores:       &runtimeapi.UInt64Value{Value: cores},
		},
		Memory: &runtimeapi.MemoryUsage{
			Timestamp:       now,
			WorkingSetBytes: &runtimeapi.UInt64Value{Value: mem},
			UsageBytes:      &runtimeapi.UInt64Value{Value: mem},
			RssBytes:        &runtimeapi.UInt64Value{Value: mem},
			AvailableBytes:  &runtimeapi.UInt64Value{},
			PageFaults:      &runtimeapi.UInt64Value{},
			MajorPageFaults: &runtimeapi.UInt64Value{},
		},
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/fakecri"},
			UsedBytes:  &runtimeapi.UInt64Value{Value: c.behavior.Disk.RootfsBytes},
			InodesUsed: &runtimeapi.UInt64Value{Value: c.behavior.Disk.RootfsInodes},
		},
	}
}

// ContainerStats implements RuntimeService.
func (r *Runtime) ContainerStats(_ context.Context, id string) (*runtimeapi.ContainerStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ContainerStats"); err != nil {
		return nil, err
	}
	c, _, err := lookup(r.containers, id, "container")
	if err != nil {
		return nil, err
	}
	return r.containerStats(c), nil
}

// ListContainerStats implements RuntimeService.
func (r *Runtime) ListContainerStats(_ context.Context, f *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ListContainerStats"); err != nil {
		return nil, err
	}
	var out []*runtimeapi.ContainerStats
	for _, id := range slices.Sorted(maps.Keys(r.containers)) {
		c := r.containers[id]
		if f != nil {
			if f.GetId() != "" && !hasPrefix(c.id, f.GetId()) {
				continue
			}
			if f.GetPodSandboxId() != "" && !hasPrefix(c.sandboxID, f.GetPodSandboxId()) {
				continue
			}
			if !matchLabels(f.GetLabelSelector(), c.config.GetLabels()) {
				continue
			}
		}
		out = append(out, r.containerStats(c))
	}
	return out, nil
}

func (r *Runtime) sandboxStats(sb *sandbox) *runtimeapi.PodSandboxStats {
	now := r.now().UnixNano()
	linux := &runtimeapi.LinuxPodSandboxStats{
		Cpu:     &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{}, UsageNanoCores: &runtimeapi.UInt64Value{}},
		Memory:  &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{}, UsageBytes: &runtimeapi.UInt64Value{}, RssBytes: &runtimeapi.UInt64Value{}},
		Process: &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: &runtimeapi.UInt64Value{}},
	}
	for _, c := range r.sandboxContainersLocked(sb.id) {
		cs := r.containerStats(c)
		linux.Containers = append(linux.Containers, cs)
		linux.Cpu.UsageCoreNanoSeconds.Value += cs.Cpu.UsageCoreNanoSeconds.Value
		linux.Cpu.UsageNanoCores.Value += cs.Cpu.UsageNanoCores.Value
		linux.Memory.WorkingSetBytes.Value += cs.Memory.WorkingSetBytes.Value
		linux.Memory.UsageBytes.Value += cs.Memory.UsageBytes.Value
		linux.Memory.RssBytes.Value += cs.Memory.RssBytes.Value
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			linux.Process.ProcessCount.Value++
		}
	}
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{
			Id:          sb.id,
			Metadata:    sb.config.GetMetadata(),
			Labels:      maps.Clone(sb.config.GetLabels()),
			Annotations: maps.Clone(sb.config.GetAnnotations()),
		},
		Linux: linux,
	}
}

// PodSandboxStats implements RuntimeService: the sum of the sandbox's
// containers' stats.
func (r *Runtime) PodSandboxStats(_ context.Context, id string) (*runtimeapi.PodSandboxStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("PodSandboxStats"); err != nil {
		return nil, err
	}
	sb, _, err := lookup(r.sandboxes, id, "sandbox")
	if err != nil {
		return nil, err
	}
	return r.sandboxStats(sb), nil
}

// ListPodSandboxStats implements RuntimeService.
func (r *Runtime) ListPodSandboxStats(_ context.Context, f *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ListPodSandboxStats"); err != nil {
		return nil, err
	}
	var out []*runtimeapi.PodSandboxStats
	for _, id := range slices.Sorted(maps.Keys(r.sandboxes)) {
		sb := r.sandboxes[id]
		if f != nil {
			if f.GetId() != "" && !hasPrefix(sb.id, f.GetId()) {
				continue
			}
			if !matchLabels(f.GetLabelSelector(), sb.config.GetLabels()) {
				continue
			}
		}
		out = append(out, r.sandboxStats(sb))
	}
	return out, nil
}

// ListMetricDescriptors implements RuntimeService: fakecri offers none.
func (r *Runtime) ListMetricDescriptors(context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	return nil, nil
}

// ListPodSandboxMetrics implements RuntimeService: fakecri offers none.
func (r *Runtime) ListPodSandboxMetrics(context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	return nil, nil
}
