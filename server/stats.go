package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// StatsProvider gives the node's and its pods' resource figures, served on
// /stats/summary and /metrics/resource. It blocks until the figures are
// gathered or ctx ends and must be safe for concurrent use; the server
// does not mutate what it returns.
type StatsProvider interface {
	Summary(ctx context.Context) (*statsapi.Summary, error)
}

// CRIStatsService is what CRIStats reads from a CRI runtime; the CRI
// RuntimeService implements it, and so does runtime/fakecri.
type CRIStatsService interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
}

// ImageFsInfoer reports the runtime's image filesystem; the CRI
// ImageManagerService implements it.
type ImageFsInfoer interface {
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// CRIStatsConfig configures NewCRIStats. Zero fields are the defaults
// named.
type CRIStatsConfig struct {
	// NodeName is the summary's node name. Required.
	NodeName string
	// Runtime is the CRI runtime. Required.
	Runtime CRIStatsService
	// Images reports the image filesystem (node.runtime.imageFs).
	// Default: Runtime, if it implements ImageFsInfoer; else none.
	Images ImageFsInfoer
	// ProcDir is where the node's /proc is read (stat, meminfo). Default
	// "/proc".
	ProcDir string
	// RootDir is a directory on the node's filesystem, whose capacity is
	// the node's fs figures. Default "/".
	RootDir string
	// MachineIDFile and SystemUUIDFile hold the machine's identity, the
	// labels of /metrics/cadvisor's machine_ metrics. Defaults
	// "/etc/machine-id" and "/sys/class/dmi/id/product_uuid"; a file that
	// cannot be read is an empty label.
	MachineIDFile, SystemUUIDFile string
	// Clock stamps the node's figures and times the CPU rate. Default:
	// the real clock.
	Clock clock.PassiveClock
	// VolumeStats, when set, gives each pod's volume figures
	// (volumes.Manager.VolumeStats), the summary's pods[].volume; the
	// eviction manager reads them to enforce emptyDir sizeLimits.
	// Default: none.
	VolumeStats func(uid types.UID) []statsapi.VolumeStats
}

// CRIStats is the default StatsProvider: pod and container figures from
// the runtime's ListPodSandboxStats (ready sandboxes, running containers;
// when it fails, ListContainerStats summed per pod),
// the image filesystem from ImageFsInfo, and the node's CPU, memory and
// root filesystem from /proc and statfs. The node's usageNanoCores is the
// rate since the previous Summary (absent on the first). Safe for
// concurrent use.
type CRIStats struct {
	cfg CRIStatsConfig

	// mu guards last, the previous node CPU sample.
	mu   sync.Mutex
	last cpuSample
}

type cpuSample struct {
	at    time.Time
	usage uint64 // core-nanoseconds
}

var _ StatsProvider = (*CRIStats)(nil)

// NewCRIStats returns a CRIStats. It does no I/O. It fails when NodeName
// or Runtime is missing.
func NewCRIStats(cfg CRIStatsConfig) (*CRIStats, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("server: CRIStatsConfig.NodeName is required")
	}
	if cfg.Runtime == nil {
		return nil, errors.New("server: CRIStatsConfig.Runtime is required")
	}
	if cfg.Images == nil {
		cfg.Images, _ = cfg.Runtime.(ImageFsInfoer)
	}
	if cfg.ProcDir == "" {
		cfg.ProcDir = "/proc"
	}
	if cfg.RootDir == "" {
		cfg.RootDir = "/"
	}
	if cfg.MachineIDFile == "" {
		cfg.MachineIDFile = "/etc/machine-id"
	}
	if cfg.SystemUUIDFile == "" {
		cfg.SystemUUIDFile = "/sys/class/dmi/id/product_uuid"
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &CRIStats{cfg: cfg}, nil
}

// Summary gathers the figures. A runtime error fails it; a node figure
// that cannot be read (no /proc) is left out.
func (s *CRIStats) Summary(ctx context.Context) (*statsapi.Summary, error) {
	snap, err := s.gather(ctx)
	if err != nil {
		return nil, err
	}
	node, _ := s.node()
	sum := &statsapi.Summary{Node: node, Pods: make([]statsapi.PodStats, 0, len(snap.pods))}
	for _, p := range snap.pods {
		pod := p.stats
		pod.Containers = make([]statsapi.ContainerStats, 0, len(p.containers))
		for _, c := range p.containers {
			pod.Containers = append(pod.Containers, c.stats)
		}
		if s.cfg.VolumeStats != nil {
			pod.VolumeStats = s.cfg.VolumeStats(types.UID(pod.PodRef.UID))
		}
		sum.Pods = append(sum.Pods, pod)
	}
	if fs := s.imageFs(ctx); fs != nil {
		sum.Node.Runtime = &statsapi.RuntimeStats{ImageFs: fs}
	}
	return sum, nil
}

// criSnapshot is one reading of the runtime: its ready sandboxes with
// their running containers and their figures.
type criSnapshot struct {
	pods []criPod
}

type criPod struct {
	sandboxID  string
	stats      statsapi.PodStats // without Containers
	containers []criContainer
}

type criContainer struct {
	id, image    string
	stats        statsapi.ContainerStats
	fsMountpoint string // the writable layer's filesystem, as the runtime names it
}

// gather reads the runtime's ready sandboxes, running containers and
// their stats (ListPodSandboxStats, or ListContainerStats summed per pod
// when that fails).
func (s *CRIStats) gather(ctx context.Context) (*criSnapshot, error) {
	rt := s.cfg.Runtime
	sandboxes, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, fmt.Errorf("server: stats: listing sandboxes: %w", err)
	}
	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, fmt.Errorf("server: stats: listing containers: %w", err)
	}
	stats, err := rt.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
	if err != nil && ctx.Err() == nil {
		// Unimplemented (containerd 1.6 on some set-ups), or a sandbox
		// without a cgroup of its own: its containers still have figures.
		var ferr error
		if stats, ferr = sandboxStatsFromContainers(ctx, rt, sandboxes, containers); ferr == nil {
			err = nil
		} else {
			err = errors.Join(err, ferr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("server: stats: sandbox stats: %w", err)
	}
	ready := make(map[string]*runtimeapi.PodSandbox, len(sandboxes))
	for _, sb := range sandboxes {
		ready[sb.GetId()] = sb
	}
	running := make(map[string]*runtimeapi.Container, len(containers))
	for _, c := range containers {
		running[c.GetId()] = c
	}
	snap := &criSnapshot{pods: make([]criPod, 0, len(stats))}
	for _, ps := range stats {
		sb, ok := ready[ps.GetAttributes().GetId()]
		if !ok {
			continue
		}
		md := ps.GetAttributes().GetMetadata()
		pod := criPod{sandboxID: sb.GetId(), stats: statsapi.PodStats{
			PodRef:    statsapi.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
			StartTime: metav1.NewTime(time.Unix(0, sb.GetCreatedAt())),
		}}
		linux := ps.GetLinux()
		pod.stats.CPU = cpuStats(linux.GetCpu())
		pod.stats.Memory = memoryStats(linux.GetMemory())
		if n := linux.GetProcess().GetProcessCount(); n != nil {
			pod.stats.ProcessStats = &statsapi.ProcessStats{ProcessCount: ptr(n.GetValue())}
		}
		if net := linux.GetNetwork(); net != nil {
			pod.stats.Network = networkStats(net)
		}
		pod.containers = make([]criContainer, 0, len(linux.GetContainers()))
		for _, cs := range linux.GetContainers() {
			c, ok := running[cs.GetAttributes().GetId()]
			if !ok {
				continue
			}
			image := c.GetImage().GetUserSpecifiedImage()
			if image == "" {
				image = c.GetImage().GetImage()
			}
			pod.containers = append(pod.containers, criContainer{
				id: c.GetId(), image: image, fsMountpoint: cs.GetWritableLayer().GetFsId().GetMountpoint(),
				stats: statsapi.ContainerStats{
					Name:      cs.GetAttributes().GetMetadata().GetName(),
					StartTime: metav1.NewTime(time.Unix(0, c.GetCreatedAt())),
					CPU:       cpuStats(cs.GetCpu()),
					Memory:    memoryStats(cs.GetMemory()),
					Swap:      swapStats(cs.GetSwap()),
					Rootfs:    fsUsage(cs.GetWritableLayer()),
				},
			})
		}
		pod.stats.Swap = podSwap(pod.containers)
		snap.pods = append(snap.pods, pod)
	}
	return snap, nil
}

// imageFs reads the runtime's image filesystem, or nil.
func (s *CRIStats) imageFs(ctx context.Context) *statsapi.FsStats {
	if s.cfg.Images == nil {
		return nil
	}
	fs, err := s.cfg.Images.ImageFsInfo(ctx)
	if err != nil || len(fs.GetImageFilesystems()) == 0 {
		return nil
	}
	img := fs.GetImageFilesystems()[0]
	st := fsUsage(img)
	if capa := statfs(img.GetFsId().GetMountpoint(), time.Unix(0, img.GetTimestamp())); capa != nil {
		st.CapacityBytes, st.AvailableBytes, st.Inodes, st.InodesFree = capa.CapacityBytes, capa.AvailableBytes, capa.Inodes, capa.InodesFree
	}
	return st
}

// podSwap is a pod's swap, the sum of its containers', as the kubelet
// sums it when the runtime gives none for the pod; nil when no container
// has swap figures.
func podSwap(cs []criContainer) *statsapi.SwapStats {
	var out *statsapi.SwapStats
	for _, c := range cs {
		sw := c.stats.Swap
		if sw == nil {
			continue
		}
		if out == nil {
			out = &statsapi.SwapStats{Time: sw.Time, SwapAvailableBytes: ptr[uint64](0), SwapUsageBytes: ptr[uint64](0)}
		}
		if sw.Time.After(out.Time.Time) {
			out.Time = sw.Time
		}
		if sw.SwapAvailableBytes != nil {
			*out.SwapAvailableBytes += *sw.SwapAvailableBytes
		}
		if sw.SwapUsageBytes != nil {
			*out.SwapUsageBytes += *sw.SwapUsageBytes
		}
	}
	return out
}

// sandboxStatsFromContainers builds sandbox stats from ListContainerStats
// when ListPodSandboxStats fails (not implemented, or, as containerd 1.6
// answers, a sandbox with no cgroup path of its own): a pod's CPU and
// memory are the sums of its running containers'.
func sandboxStatsFromContainers(ctx context.Context, rt CRIStatsService, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) ([]*runtimeapi.PodSandboxStats, error) {
	cs, err := rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, err
	}
	sandboxOf := make(map[string]string, len(containers))
	for _, c := range containers {
		sandboxOf[c.GetId()] = c.GetPodSandboxId()
	}
	bySandbox := make(map[string]*runtimeapi.PodSandboxStats, len(sandboxes))
	out := make([]*runtimeapi.PodSandboxStats, 0, len(sandboxes))
	for _, sb := range sandboxes {
		ps := &runtimeapi.PodSandboxStats{
			Attributes: &runtimeapi.PodSandboxAttributes{Id: sb.GetId(), Metadata: sb.GetMetadata()},
			Linux: &runtimeapi.LinuxPodSandboxStats{
				Cpu:    &runtimeapi.CpuUsage{UsageCoreNanoSeconds: &runtimeapi.UInt64Value{}, UsageNanoCores: &runtimeapi.UInt64Value{}},
				Memory: &runtimeapi.MemoryUsage{WorkingSetBytes: &runtimeapi.UInt64Value{}, UsageBytes: &runtimeapi.UInt64Value{}},
			},
		}
		bySandbox[sb.GetId()] = ps
		out = append(out, ps)
	}
	for _, c := range cs {
		ps, ok := bySandbox[sandboxOf[c.GetAttributes().GetId()]]
		if !ok {
			continue
		}
		l := ps.Linux
		l.Containers = append(l.Containers, c)
		if cpu := c.GetCpu(); cpu != nil {
			l.Cpu.Timestamp = max(l.Cpu.Timestamp, cpu.GetTimestamp())
			l.Cpu.UsageCoreNanoSeconds.Value += cpu.GetUsageCoreNanoSeconds().GetValue()
			l.Cpu.UsageNanoCores.Value += cpu.GetUsageNanoCores().GetValue()
		}
		if mem := c.GetMemory(); mem != nil {
			l.Memory.Timestamp = max(l.Memory.Timestamp, mem.GetTimestamp())
			l.Memory.WorkingSetBytes.Value += mem.GetWorkingSetBytes().GetValue()
			l.Memory.UsageBytes.Value += mem.GetUsageBytes().GetValue()
		}
	}
	return out, nil
}

// node reads the node's own figures, and what /proc says of the machine:
// its CPUs and memory (zero when unread).
func (s *CRIStats) node() (statsapi.NodeStats, machineFigures) {
	now := s.cfg.Clock.Now()
	n := statsapi.NodeStats{NodeName: s.cfg.NodeName}
	var m machineFigures
	if st, err := readProcStat(filepath.Join(s.cfg.ProcDir, "stat")); err == nil {
		n.StartTime = metav1.NewTime(st.boot)
		m.cpus = st.cpus
		cpu := &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: ptr(st.usage)}
		s.mu.Lock()
		if last := s.last; !last.at.IsZero() && now.After(last.at) && st.usage >= last.usage {
			cpu.UsageNanoCores = ptr(uint64(float64(st.usage-last.usage) / now.Sub(last.at).Seconds()))
		}
		s.last = cpuSample{at: now, usage: st.usage}
		s.mu.Unlock()
		n.CPU = cpu
	}
	if mi, err := readMeminfo(filepath.Join(s.cfg.ProcDir, "meminfo")); err == nil {
		total, free, avail := mi["MemTotal"], mi["MemFree"], mi["MemAvailable"]
		m.memory = total
		n.Memory = &statsapi.MemoryStats{
			Time:            metav1.NewTime(now),
			AvailableBytes:  ptr(avail),
			UsageBytes:      ptr(total - free),
			WorkingSetBytes: ptr(total - avail),
		}
		if swapTotal, ok := mi["SwapTotal"]; ok {
			swapFree := min(mi["SwapFree"], swapTotal)
			n.Swap = &statsapi.SwapStats{
				Time:               metav1.NewTime(now),
				SwapAvailableBytes: ptr(swapFree),
				SwapUsageBytes:     ptr(swapTotal - swapFree),
			}
		}
	}
	n.Fs = statfs(s.cfg.RootDir, now)
	return n, m
}

// machineFigures are the machine's logical CPUs and memory in bytes.
type machineFigures struct {
	cpus   int
	memory uint64
}

// userHZ is the unit of /proc/stat's CPU times on Linux.
const userHZ = 100

// procStat is what /proc/stat says: the node's busy CPU time in
// core-nanoseconds, its boot time and its online CPUs.
type procStat struct {
	usage uint64
	boot  time.Time
	cpus  int
}

func readProcStat(path string) (procStat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, err
	}
	var st procStat
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 8 && f[0] == "cpu":
			// user nice system idle iowait irq softirq steal: all but idle and iowait are busy.
			for _, i := range []int{1, 2, 3, 6, 7, 8} {
				v, err := strconv.ParseUint(f[i], 10, 64)
				if err != nil {
					return procStat{}, fmt.Errorf("%s: %w", path, err)
				}
				st.usage += v
			}
			found = true
		case len(f) > 0 && len(f[0]) > 3 && strings.HasPrefix(f[0], "cpu"):
			if _, err := strconv.Atoi(f[0][3:]); err == nil {
				st.cpus++
			}
		case len(f) == 2 && f[0] == "btime":
			if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				st.boot = time.Unix(v, 0)
			}
		}
	}
	if !found {
		return procStat{}, fmt.Errorf("%s: no cpu line", path)
	}
	st.usage *= 1e9 / userHZ
	return st, nil
}

// readMeminfo returns /proc/meminfo's figures in bytes.
func readMeminfo(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if len(f) == 3 && f[2] == "kB" {
			v *= 1024
		}
		out[strings.TrimSuffix(f[0], ":")] = v
	}
	if _, ok := out["MemTotal"]; !ok {
		return nil, fmt.Errorf("%s: no MemTotal", path)
	}
	if _, ok := out["MemAvailable"]; !ok {
		out["MemAvailable"] = out["MemFree"]
	}
	return out, nil
}

// statfs returns the capacity of the filesystem holding dir, or nil.
func statfs(dir string, at time.Time) *statsapi.FsStats {
	if dir == "" {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil
	}
	bs := uint64(st.Bsize)
	return &statsapi.FsStats{
		Time:           metav1.NewTime(at),
		CapacityBytes:  ptr(st.Blocks * bs),
		AvailableBytes: ptr(st.Bavail * bs),
		UsedBytes:      ptr((st.Blocks - st.Bfree) * bs),
		Inodes:         ptr(st.Files),
		InodesFree:     ptr(st.Ffree),
		InodesUsed:     ptr(st.Files - st.Ffree),
	}
}

func cpuStats(c *runtimeapi.CpuUsage) *statsapi.CPUStats {
	if c == nil {
		return nil
	}
	out := &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(0, c.GetTimestamp()))}
	if v := c.GetUsageNanoCores(); v != nil {
		out.UsageNanoCores = ptr(v.GetValue())
	}
	if v := c.GetUsageCoreNanoSeconds(); v != nil {
		out.UsageCoreNanoSeconds = ptr(v.GetValue())
	}
	return out
}

func memoryStats(m *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	out := &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, m.GetTimestamp()))}
	for _, f := range []struct {
		v   *runtimeapi.UInt64Value
		dst **uint64
	}{
		{m.GetWorkingSetBytes(), &out.WorkingSetBytes}, {m.GetUsageBytes(), &out.UsageBytes}, {m.GetRssBytes(), &out.RSSBytes},
		{m.GetAvailableBytes(), &out.AvailableBytes}, {m.GetPageFaults(), &out.PageFaults}, {m.GetMajorPageFaults(), &out.MajorPageFaults},
	} {
		if f.v != nil {
			*f.dst = ptr(f.v.GetValue())
		}
	}
	return out
}

func swapStats(sw *runtimeapi.SwapUsage) *statsapi.SwapStats {
	if sw == nil {
		return nil
	}
	out := &statsapi.SwapStats{Time: metav1.NewTime(time.Unix(0, sw.GetTimestamp()))}
	if v := sw.GetSwapAvailableBytes(); v != nil {
		out.SwapAvailableBytes = ptr(v.GetValue())
	}
	if v := sw.GetSwapUsageBytes(); v != nil {
		out.SwapUsageBytes = ptr(v.GetValue())
	}
	return out
}

func fsUsage(f *runtimeapi.FilesystemUsage) *statsapi.FsStats {
	if f == nil {
		return nil
	}
	out := &statsapi.FsStats{Time: metav1.NewTime(time.Unix(0, f.GetTimestamp()))}
	if v := f.GetUsedBytes(); v != nil {
		out.UsedBytes = ptr(v.GetValue())
	}
	if v := f.GetInodesUsed(); v != nil {
		out.InodesUsed = ptr(v.GetValue())
	}
	return out
}

func networkStats(n *runtimeapi.NetworkUsage) *statsapi.NetworkStats {
	iface := func(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
		s := statsapi.InterfaceStats{Name: i.GetName()}
		if v := i.GetRxBytes(); v != nil {
			s.RxBytes = ptr(v.GetValue())
		}
		if v := i.GetRxErrors(); v != nil {
			s.RxErrors = ptr(v.GetValue())
		}
		if v := i.GetTxBytes(); v != nil {
			s.TxBytes = ptr(v.GetValue())
		}
		if v := i.GetTxErrors(); v != nil {
			s.TxErrors = ptr(v.GetValue())
		}
		return s
	}
	out := &statsapi.NetworkStats{Time: metav1.NewTime(time.Unix(0, n.GetTimestamp()))}
	if d := n.GetDefaultInterface(); d != nil {
		out.InterfaceStats = iface(d)
	}
	for _, i := range n.GetInterfaces() {
		out.Interfaces = append(out.Interfaces, iface(i))
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// statsSummary serves /stats/summary; ?only_cpu_and_memory=true keeps
// only the CPU and memory figures, as the kubelet does.
func (s *Server) statsSummary(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Stats == nil {
		http.Error(w, "stats are not served here", http.StatusServiceUnavailable)
		return
	}
	onlyCPUAndMemory := false
	if v := r.URL.Query().Get("only_cpu_and_memory"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			http.Error(w, fmt.Sprintf("only_cpu_and_memory=%q is not a boolean", v), http.StatusBadRequest)
			return
		}
		onlyCPUAndMemory = b
	}
	sum, err := s.cfg.Stats.Summary(r.Context())
	if err != nil {
		http.Error(w, "Internal Error: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if onlyCPUAndMemory {
		sum = cpuAndMemoryOnly(sum)
	}
	writeJSON(w, sum)
}

func cpuAndMemoryOnly(in *statsapi.Summary) *statsapi.Summary {
	out := &statsapi.Summary{Node: statsapi.NodeStats{
		NodeName: in.Node.NodeName, StartTime: in.Node.StartTime, CPU: in.Node.CPU, Memory: in.Node.Memory, Swap: in.Node.Swap,
	}, Pods: make([]statsapi.PodStats, 0, len(in.Pods))}
	for _, p := range in.Pods {
		q := statsapi.PodStats{PodRef: p.PodRef, StartTime: p.StartTime, CPU: p.CPU, Memory: p.Memory, Swap: p.Swap}
		for _, c := range p.Containers {
			q.Containers = append(q.Containers, statsapi.ContainerStats{Name: c.Name, StartTime: c.StartTime, CPU: c.CPU, Memory: c.Memory, Swap: c.Swap})
		}
		out.Pods = append(out.Pods, q)
	}
	return out
}

// The metrics of /metrics/resource, by the kubelet's names, labels and
// help texts (with their stability level, as the kubelet's metrics
// framework writes it).
var (
	descNodeCPU            = prometheus.NewDesc("node_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	descNodeMemory         = prometheus.NewDesc("node_memory_working_set_bytes", "[STABLE] Current working set of the node in bytes", nil, nil)
	descNodeSwap           = prometheus.NewDesc("node_swap_usage_bytes", "[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", nil, nil)
	descPodCPU             = prometheus.NewDesc("pod_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	descPodMemory          = prometheus.NewDesc("pod_memory_working_set_bytes", "[STABLE] Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	descPodSwap            = prometheus.NewDesc("pod_swap_usage_bytes", "[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", []string{"pod", "namespace"}, nil)
	descContainerCPU       = prometheus.NewDesc("container_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	descContainerMem       = prometheus.NewDesc("container_memory_working_set_bytes", "[STABLE] Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	descContainerSwap      = prometheus.NewDesc("container_swap_usage_bytes", "[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", []string{"container", "pod", "namespace"}, nil)
	descContainerSwapLimit = prometheus.NewDesc("container_swap_limit_bytes", "[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems", []string{"container", "pod", "namespace"}, nil)
	descContainerUp        = prometheus.NewDesc("container_start_time_seconds", "[STABLE] Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	descScrapeError        = prometheus.NewDesc("resource_scrape_error", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// resourceCollector reports one Summary (or its error) as the kubelet's
// resource metrics. Each usage sample carries the time the figure was
// read (metrics-server computes CPU rates from it), as the kubelet's do;
// a container's start time carries none.
type resourceCollector struct {
	sum *statsapi.Summary
	err error
}

func (c resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodeCPU, descNodeMemory, descNodeSwap, descPodCPU, descPodMemory, descPodSwap,
		descContainerCPU, descContainerMem, descContainerSwap, descContainerSwapLimit, descContainerUp, descScrapeError} {
		ch <- d
	}
}

// sample sends a metric stamped with at (none when at is zero).
func sample(ch chan<- prometheus.Metric, at metav1.Time, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m := prometheus.MustNewConstMetric(d, t, v, labels...)
	if !at.IsZero() {
		m = prometheus.NewMetricWithTimestamp(at.Time, m)
	}
	ch <- m
}

func (c resourceCollector) Collect(ch chan<- prometheus.Metric) {
	if c.err != nil {
		ch <- prometheus.MustNewConstMetric(descScrapeError, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(descScrapeError, prometheus.GaugeValue, 0)
	n := c.sum.Node
	if n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
		sample(ch, n.CPU.Time, descNodeCPU, prometheus.CounterValue, float64(*n.CPU.UsageCoreNanoSeconds)/1e9)
	}
	if n.Memory != nil && n.Memory.WorkingSetBytes != nil {
		sample(ch, n.Memory.Time, descNodeMemory, prometheus.GaugeValue, float64(*n.Memory.WorkingSetBytes))
	}
	if n.Swap != nil && n.Swap.SwapUsageBytes != nil {
		sample(ch, n.Swap.Time, descNodeSwap, prometheus.GaugeValue, float64(*n.Swap.SwapUsageBytes))
	}
	seenPod := map[statsapi.PodReference]bool{}
	for _, p := range c.sum.Pods {
		ref := statsapi.PodReference{Name: p.PodRef.Name, Namespace: p.PodRef.Namespace}
		if seenPod[ref] {
			continue // a pod's labels appear once
		}
		seenPod[ref] = true
		if p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil {
			sample(ch, p.CPU.Time, descPodCPU, prometheus.CounterValue, float64(*p.CPU.UsageCoreNanoSeconds)/1e9, ref.Name, ref.Namespace)
		}
		if p.Memory != nil && p.Memory.WorkingSetBytes != nil {
			sample(ch, p.Memory.Time, descPodMemory, prometheus.GaugeValue, float64(*p.Memory.WorkingSetBytes), ref.Name, ref.Namespace)
		}
		if p.Swap != nil && p.Swap.SwapUsageBytes != nil {
			sample(ch, p.Swap.Time, descPodSwap, prometheus.GaugeValue, float64(*p.Swap.SwapUsageBytes), ref.Name, ref.Namespace)
		}
		seen := map[string]bool{}
		for _, ct := range p.Containers {
			if seen[ct.Name] {
				continue
			}
			seen[ct.Name] = true
			labels := []string{ct.Name, ref.Name, ref.Namespace}
			if ct.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(descContainerUp, prometheus.GaugeValue, float64(ct.StartTime.UnixNano())/1e9, labels...)
			}
			if ct.CPU != nil && ct.CPU.UsageCoreNanoSeconds != nil {
				sample(ch, ct.CPU.Time, descContainerCPU, prometheus.CounterValue, float64(*ct.CPU.UsageCoreNanoSeconds)/1e9, labels...)
			}
			if ct.Memory != nil && ct.Memory.WorkingSetBytes != nil {
				sample(ch, ct.Memory.Time, descContainerMem, prometheus.GaugeValue, float64(*ct.Memory.WorkingSetBytes), labels...)
			}
			if sw := ct.Swap; sw != nil {
				var used float64
				if sw.SwapUsageBytes != nil {
					used = float64(*sw.SwapUsageBytes)
					sample(ch, sw.Time, descContainerSwap, prometheus.GaugeValue, used, labels...)
				}
				if sw.SwapAvailableBytes != nil {
					sample(ch, sw.Time, descContainerSwapLimit, prometheus.GaugeValue, float64(*sw.SwapAvailableBytes)+used, labels...)
				}
			}
		}
	}
}

// metricsResource serves /metrics/resource from one Summary.
func (s *Server) metricsResource(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Stats == nil {
		http.Error(w, "stats are not served here", http.StatusServiceUnavailable)
		return
	}
	sum, err := s.cfg.Stats.Summary(r.Context())
	if err != nil {
		s.cfg.Logger.V(2).Info("resource metrics", "err", err)
	}
	serveCollector(w, r, resourceCollector{sum: sum, err: err})
}

// serveCollector serves c alone, from a registry of this request's own.
func serveCollector(w http.ResponseWriter, r *http.Request, c prometheus.Collector) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}
