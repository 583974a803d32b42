package server

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// ContainerStatsProvider is an optional StatsProvider capability: the
// per-container figures of /metrics/cadvisor, with the IDs, images and
// devices that the Summary API leaves out. Without it /metrics/cadvisor
// is not served (404). It blocks until the figures are gathered or ctx
// ends and must be safe for concurrent use; the server does not mutate
// what it returns. CRIStats implements it.
type ContainerStatsProvider interface {
	ContainerStats(ctx context.Context) (*ContainerStats, error)
}

// ContainerStats are the figures /metrics/cadvisor serves, in the shape
// of cAdvisor's containers: the machine, the node as a whole (cAdvisor's
// root container "/"), each pod, and each of its running containers.
type ContainerStats struct {
	// Machine is nil when the machine's figures could not be read.
	Machine *MachineInfo
	// Node is the node's usage: CPU, memory, swap, root filesystem, start
	// (boot) time.
	Node statsapi.NodeStats
	// NodeFsDevice is the device of Node.Fs, as /proc/self/mountinfo
	// names it.
	NodeFsDevice string
	Pods         []PodContainerStats
}

// MachineInfo is the machine's size and identity, the labels of
// machine_cpu_cores and machine_memory_bytes.
type MachineInfo struct {
	NumCores       int
	MemoryCapacity uint64
	// MachineID (/etc/machine-id), SystemUUID (the firmware's product
	// UUID) and BootID (the kernel's): empty when unreadable.
	MachineID, SystemUUID, BootID string
}

// PodContainerStats is one pod: its sandbox and its figures as a whole,
// and its running containers.
type PodContainerStats struct {
	Ref       statsapi.PodReference
	SandboxID string
	StartTime metav1.Time
	CPU       *statsapi.CPUStats
	Memory    *statsapi.MemoryStats
	Network   *statsapi.NetworkStats
	// Containers are the pod's running containers.
	Containers []ContainerInfo
}

// ContainerInfo is one running container.
type ContainerInfo struct {
	// ID is the runtime's container ID.
	ID string
	// Image is the image as the pod spec names it, or the runtime's
	// image ID when the runtime does not keep that.
	Image string
	// Stats are its figures: name, start time, CPU, memory, swap and
	// writable layer (Rootfs).
	Stats statsapi.ContainerStats
	// RootfsDevice is the device of the writable layer's filesystem.
	RootfsDevice string
}

var _ ContainerStatsProvider = (*CRIStats)(nil)

// ContainerStats gathers the figures of /metrics/cadvisor from the same
// runtime calls as Summary (no image filesystem), the machine's from
// /proc, MachineIDFile and SystemUUIDFile, and devices from
// /proc/self/mountinfo. A runtime error fails it; a machine or node
// figure that cannot be read is left out.
func (s *CRIStats) ContainerStats(ctx context.Context) (*ContainerStats, error) {
	snap, err := s.gather(ctx)
	if err != nil {
		return nil, err
	}
	node, m := s.node()
	out := &ContainerStats{Node: node, Pods: make([]PodContainerStats, 0, len(snap.pods))}
	if m.cpus > 0 || m.memory > 0 {
		out.Machine = &MachineInfo{
			NumCores: m.cpus, MemoryCapacity: m.memory,
			MachineID:  readID(s.cfg.MachineIDFile),
			SystemUUID: readID(s.cfg.SystemUUIDFile),
			BootID:     readID(filepath.Join(s.cfg.ProcDir, "sys/kernel/random/boot_id")),
		}
	}
	mounts := readMounts(filepath.Join(s.cfg.ProcDir, "self/mountinfo"))
	out.NodeFsDevice = mounts.deviceOf(s.cfg.RootDir)
	for _, p := range snap.pods {
		pod := PodContainerStats{
			Ref: p.stats.PodRef, SandboxID: p.sandboxID, StartTime: p.stats.StartTime,
			CPU: p.stats.CPU, Memory: p.stats.Memory, Network: p.stats.Network,
			Containers: make([]ContainerInfo, 0, len(p.containers)),
		}
		for _, c := range p.containers {
			pod.Containers = append(pod.Containers, ContainerInfo{ID: c.id, Image: c.image, Stats: c.stats, RootfsDevice: mounts.deviceOf(c.fsMountpoint)})
		}
		out.Pods = append(out.Pods, pod)
	}
	return out, nil
}

// readID reads a one-line identifier file, or "".
func readID(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// mounts maps mount points to their sources, as mountinfo lists them.
type mounts map[string]string

// readMounts reads a mountinfo file; an unreadable one is empty.
func readMounts(path string) mounts {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	out := mounts{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 {
			continue
		}
		out[unescapeMount(f[4])] = g[1] // a later mount over the same point hides the earlier one
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, ok := octal(s[i+1 : i+4]); ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	var v int
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v*8 + int(c-'0')
	}
	if v > 255 {
		return 0, false
	}
	return byte(v), true
}

// deviceOf returns the source of the mount that holds path: the mount
// whose point is the longest prefix of it. "" when path is empty or no
// mount is known.
func (m mounts) deviceOf(path string) string {
	if path == "" || len(m) == 0 {
		return ""
	}
	p := filepath.Clean(path)
	for {
		if dev, ok := m[p]; ok {
			return dev
		}
		if p == "/" || p == "." {
			return ""
		}
		p = filepath.Dir(p)
	}
}

// The metrics of /metrics/cadvisor: cAdvisor's names, help texts, types
// and labels for the figures a CRI runtime gives.
var (
	cadvisorLabels = []string{"container", "id", "image", "name", "namespace", "pod"}
	machineLabels  = []string{"machine_id", "system_uuid", "boot_id"}

	descCadvisorCPU        = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", append(cadvisorLabels[:6:6], "cpu"), nil)
	descCadvisorMemUsage   = prometheus.NewDesc("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", cadvisorLabels, nil)
	descCadvisorWorkingSet = prometheus.NewDesc("container_memory_working_set_bytes", "Current working set in bytes.", cadvisorLabels, nil)
	descCadvisorRSS        = prometheus.NewDesc("container_memory_rss", "Size of RSS in bytes.", cadvisorLabels, nil)
	descCadvisorSwap       = prometheus.NewDesc("container_memory_swap", "Container swap usage in bytes.", cadvisorLabels, nil)
	descCadvisorFsUsage    = prometheus.NewDesc("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", append(cadvisorLabels[:6:6], "device"), nil)
	descCadvisorStart      = prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", cadvisorLabels, nil)
	descCadvisorRxBytes    = prometheus.NewDesc("container_network_receive_bytes_total", "Cumulative count of bytes received", append(cadvisorLabels[:6:6], "interface"), nil)
	descCadvisorRxErrors   = prometheus.NewDesc("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", append(cadvisorLabels[:6:6], "interface"), nil)
	descCadvisorTxBytes    = prometheus.NewDesc("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", append(cadvisorLabels[:6:6], "interface"), nil)
	descCadvisorTxErrors   = prometheus.NewDesc("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", append(cadvisorLabels[:6:6], "interface"), nil)
	descContainerScrape    = prometheus.NewDesc("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil)

	descMachineCores  = prometheus.NewDesc("machine_cpu_cores", "Number of logical CPU cores.", machineLabels, nil)
	descMachineMemory = prometheus.NewDesc("machine_memory_bytes", "Amount of memory installed on the machine.", machineLabels, nil)
	descMachineScrape = prometheus.NewDesc("machine_scrape_error", "1 if there was an error while getting machine metrics, 0 otherwise.", nil, nil)
)

// cadvisorCollector reports one ContainerStats (or its error) as
// cAdvisor's metrics.
type cadvisorCollector struct {
	st  *ContainerStats
	err error
}

func (c cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCadvisorCPU, descCadvisorMemUsage, descCadvisorWorkingSet, descCadvisorRSS, descCadvisorSwap,
		descCadvisorFsUsage, descCadvisorStart, descCadvisorRxBytes, descCadvisorRxErrors, descCadvisorTxBytes, descCadvisorTxErrors,
		descContainerScrape, descMachineCores, descMachineMemory, descMachineScrape} {
		ch <- d
	}
}

func (c cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	if c.err != nil {
		ch <- prometheus.MustNewConstMetric(descContainerScrape, prometheus.GaugeValue, 1)
		ch <- prometheus.MustNewConstMetric(descMachineScrape, prometheus.GaugeValue, 1)
		return
	}
	st := c.st
	if m := st.Machine; m != nil {
		ch <- prometheus.MustNewConstMetric(descMachineCores, prometheus.GaugeValue, float64(m.NumCores), m.MachineID, m.SystemUUID, m.BootID)
		ch <- prometheus.MustNewConstMetric(descMachineMemory, prometheus.GaugeValue, float64(m.MemoryCapacity), m.MachineID, m.SystemUUID, m.BootID)
		ch <- prometheus.MustNewConstMetric(descMachineScrape, prometheus.GaugeValue, 0)
	} else {
		ch <- prometheus.MustNewConstMetric(descMachineScrape, prometheus.GaugeValue, 1)
	}
	ch <- prometheus.MustNewConstMetric(descContainerScrape, prometheus.GaugeValue, 0)

	// The node as cAdvisor's root container.
	n := st.Node
	root := []string{"", "/", "", "", "", ""}
	if !n.StartTime.IsZero() {
		ch <- prometheus.MustNewConstMetric(descCadvisorStart, prometheus.GaugeValue, float64(n.StartTime.Unix()), root...)
	}
	cadvisorCPUMemory(ch, n.CPU, n.Memory, root)
	if n.Swap != nil && n.Swap.SwapUsageBytes != nil {
		sample(ch, n.Swap.Time, descCadvisorSwap, prometheus.GaugeValue, float64(*n.Swap.SwapUsageBytes), root...)
	}
	if n.Fs != nil && n.Fs.UsedBytes != nil {
		sample(ch, n.Fs.Time, descCadvisorFsUsage, prometheus.GaugeValue, float64(*n.Fs.UsedBytes), append(root, st.NodeFsDevice)...)
	}

	for _, p := range st.Pods {
		// The pod as cAdvisor's pod cgroup: no container, image or name.
		pod := []string{"", p.SandboxID, "", "", p.Ref.Namespace, p.Ref.Name}
		if p.StartTime.Unix() > 0 {
			ch <- prometheus.MustNewConstMetric(descCadvisorStart, prometheus.GaugeValue, float64(p.StartTime.Unix()), pod...)
		}
		cadvisorCPUMemory(ch, p.CPU, p.Memory, pod)
		if p.Network != nil {
			ifaces := p.Network.Interfaces
			if len(ifaces) == 0 && p.Network.Name != "" {
				ifaces = []statsapi.InterfaceStats{p.Network.InterfaceStats}
			}
			for _, i := range ifaces {
				l := append(pod[:6:6], i.Name)
				for _, f := range []struct {
					d *prometheus.Desc
					v *uint64
				}{{descCadvisorRxBytes, i.RxBytes}, {descCadvisorRxErrors, i.RxErrors}, {descCadvisorTxBytes, i.TxBytes}, {descCadvisorTxErrors, i.TxErrors}} {
					if f.v != nil {
						sample(ch, p.Network.Time, f.d, prometheus.CounterValue, float64(*f.v), l...)
					}
				}
			}
		}
		for _, ci := range p.Containers {
			c := ci.Stats
			l := []string{c.Name, ci.ID, ci.Image, ci.ID, p.Ref.Namespace, p.Ref.Name}
			if c.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(descCadvisorStart, prometheus.GaugeValue, float64(c.StartTime.Unix()), l...)
			}
			cadvisorCPUMemory(ch, c.CPU, c.Memory, l)
			if c.Swap != nil && c.Swap.SwapUsageBytes != nil {
				sample(ch, c.Swap.Time, descCadvisorSwap, prometheus.GaugeValue, float64(*c.Swap.SwapUsageBytes), l...)
			}
			if c.Rootfs != nil && c.Rootfs.UsedBytes != nil {
				sample(ch, c.Rootfs.Time, descCadvisorFsUsage, prometheus.GaugeValue, float64(*c.Rootfs.UsedBytes), append(l, ci.RootfsDevice)...)
			}
		}
	}
}

// cadvisorCPUMemory sends the CPU time (cpu="total": the runtime gives no
// per-CPU figures) and the memory figures of one cAdvisor container.
func cadvisorCPUMemory(ch chan<- prometheus.Metric, cpu *statsapi.CPUStats, mem *statsapi.MemoryStats, labels []string) {
	if cpu != nil && cpu.UsageCoreNanoSeconds != nil {
		sample(ch, cpu.Time, descCadvisorCPU, prometheus.CounterValue, float64(*cpu.UsageCoreNanoSeconds)/1e9, append(labels[:6:6], "total")...)
	}
	if mem == nil {
		return
	}
	for _, f := range []struct {
		d *prometheus.Desc
		v *uint64
	}{{descCadvisorMemUsage, mem.UsageBytes}, {descCadvisorWorkingSet, mem.WorkingSetBytes}, {descCadvisorRSS, mem.RSSBytes}} {
		if f.v != nil {
			sample(ch, mem.Time, f.d, prometheus.GaugeValue, float64(*f.v), labels...)
		}
	}
}

// metricsCadvisor serves /metrics/cadvisor from one ContainerStats.
func (s *Server) metricsCadvisor(w http.ResponseWriter, r *http.Request) {
	st, err := s.cfg.Stats.(ContainerStatsProvider).ContainerStats(r.Context())
	if err != nil {
		s.cfg.Logger.V(2).Info("cadvisor metrics", "err", err)
	}
	serveCollector(w, r, cadvisorCollector{st: st, err: err})
}
