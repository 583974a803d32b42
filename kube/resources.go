package kube

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourceProvider gives the node's capacity.
type ResourceProvider interface {
	// Capacity returns the node's capacity: at least cpu, memory and
	// ephemeral-storage. A "pods" entry, if any, replaces
	// NodeConfig.MaxPods. It is called on every status computation, from
	// one goroutine at a time; the caller owns the returned list.
	Capacity() (v1.ResourceList, error)
}

// HostResources reads the capacity of the machine it runs on: cpu from
// runtime.NumCPU, memory from MemTotal in /proc/meminfo, and
// ephemeral-storage from the size of the file system holding RootDir.
type HostResources struct {
	// RootDir is where pods' writable layers, logs and emptyDirs live.
	// Empty means "/".
	RootDir string
	// ProcDir is where /proc is mounted. Empty means "/proc".
	ProcDir string
}

var _ ResourceProvider = HostResources{}

// Capacity implements ResourceProvider.
func (h HostResources) Capacity() (v1.ResourceList, error) {
	root, proc := h.RootDir, h.ProcDir
	if root == "" {
		root = "/"
	}
	if proc == "" {
		proc = "/proc"
	}
	mem, err := memTotal(filepath.Join(proc, "meminfo"))
	if err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return nil, fmt.Errorf("kube: statfs %s: %w", root, err)
	}
	return v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(mem, resource.BinarySI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(int64(st.Blocks)*int64(st.Bsize), resource.BinarySI),
	}, nil
}

// memTotal returns MemTotal from a meminfo file, in bytes.
func memTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("kube: memory capacity: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "MemTotal:" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || kb < 0 || (len(fields) > 2 && fields[2] != "kB") {
			return 0, fmt.Errorf("kube: memory capacity: %s: bad MemTotal line %q", path, sc.Text())
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("kube: memory capacity: %s: %w", path, err)
	}
	return 0, fmt.Errorf("kube: memory capacity: %s has no MemTotal line", path)
}

// allocatable subtracts reserved from capacity, never going below zero.
func allocatable(capacity, reserved v1.ResourceList) v1.ResourceList {
	out := capacity.DeepCopy()
	for name, r := range reserved {
		q, ok := out[name]
		if !ok {
			continue
		}
		q.Sub(r)
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		out[name] = q
	}
	return out
}
