package cgroupfs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nodekit/nodekit/internal/podutil"
)

const (
	// maxShares is the most CPU shares a v1 cgroup takes.
	maxShares = 262144
	// maxWeight is the largest cgroup v2 cpu.weight.
	maxWeight = 10000
	// defaultPeriod is the kernel's CFS period, in µs, for a cgroup
	// nobody has set one on.
	defaultPeriod = 100000
	// unlimitedFrom is where a read limit counts as no limit: the v1
	// kernel reports "no limit" as the largest page-aligned int64, and no
	// machine has 4 EiB.
	unlimitedFrom = 1 << 62
)

// File is one value to write to a cgroup interface file.
type File struct {
	Controller string // the hierarchy holding the file on v1: "cpu", "memory", "pids"
	Name       string // e.g. "cpu.shares", "cpu.max"
	Value      string
}

// CPUSharesToWeight converts v1 cpu.shares, from [2, 262144], to a v2
// cpu.weight, in [1, 10000], by the formula the kubelet and runc use;
// values outside the range are clamped.
func CPUSharesToWeight(shares uint64) uint64 {
	shares = min(max(shares, podutil.MinShares), maxShares)
	return 1 + (shares-podutil.MinShares)*(maxWeight-1)/(maxShares-podutil.MinShares)
}

// CPUWeightToShares is the inverse of CPUSharesToWeight, as the kubelet
// reads a v2 cgroup's CPU request back; the round trip may lose a little.
func CPUWeightToShares(weight uint64) uint64 {
	weight = min(max(weight, 1), maxWeight)
	return (weight-1)*(maxShares-podutil.MinShares)/(maxWeight-1) + podutil.MinShares
}

// V1Files returns the cgroup v1 files that set r, in the order they are
// written: the memory limit first (a limit below usage fails before
// anything changed), then pids, CPU shares, the CFS period and last its
// quota. It fails with ErrInvalid for a value no cgroup takes.
func V1Files(r Resources) ([]File, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	var fs []File
	if r.MemoryLimit != nil {
		fs = append(fs, File{"memory", "memory.limit_in_bytes", strconv.FormatInt(*r.MemoryLimit, 10)})
	}
	if r.PidsLimit != nil {
		fs = append(fs, File{"pids", "pids.max", limitString(*r.PidsLimit)})
	}
	if r.CPUShares != nil {
		fs = append(fs, File{"cpu", "cpu.shares", strconv.FormatUint(*r.CPUShares, 10)})
	}
	if r.CPUPeriod != nil {
		fs = append(fs, File{"cpu", "cpu.cfs_period_us", strconv.FormatUint(*r.CPUPeriod, 10)})
	}
	if r.CPUQuota != nil {
		fs = append(fs, File{"cpu", "cpu.cfs_quota_us", strconv.FormatInt(*r.CPUQuota, 10)})
	}
	return fs, nil
}

// V2Files maps r, in cgroup v1 units, onto the cgroup v2 files, in the
// order V1Files writes them: memory.max, pids.max ("max" for -1),
// cpu.weight (CPUSharesToWeight), cpu.max ("<quota> <period>", quota
// "max" for -1). cpu.max holds quota and period together: when r sets
// only one of them, the other is taken as the kernel's default (no limit,
// a 100 ms period); Manager.Set fills it from the cgroup instead.
func V2Files(r Resources) ([]File, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	var fs []File
	if r.MemoryLimit != nil {
		fs = append(fs, File{"memory", "memory.max", limitString(*r.MemoryLimit)})
	}
	if r.PidsLimit != nil {
		fs = append(fs, File{"pids", "pids.max", limitString(*r.PidsLimit)})
	}
	if r.CPUShares != nil {
		fs = append(fs, File{"cpu", "cpu.weight", strconv.FormatUint(CPUSharesToWeight(*r.CPUShares), 10)})
	}
	if r.CPUQuota != nil || r.CPUPeriod != nil {
		quota, period := int64(-1), uint64(defaultPeriod)
		if r.CPUQuota != nil {
			quota = *r.CPUQuota
		}
		if r.CPUPeriod != nil {
			period = *r.CPUPeriod
		}
		fs = append(fs, File{"cpu", "cpu.max", limitString(quota) + " " + strconv.FormatUint(period, 10)})
	}
	return fs, nil
}

// validate refuses values the kernel would refuse or misread.
func (r Resources) validate() error {
	bad := func(field string, v any) error {
		return fmt.Errorf("%w: %s %v", ErrInvalid, field, v)
	}
	switch {
	case r.CPUQuota != nil && *r.CPUQuota != -1 && *r.CPUQuota <= 0:
		return bad("CPUQuota", *r.CPUQuota)
	case r.CPUPeriod != nil && *r.CPUPeriod == 0:
		return bad("CPUPeriod", *r.CPUPeriod)
	case r.MemoryLimit != nil && *r.MemoryLimit != -1 && *r.MemoryLimit <= 0:
		return bad("MemoryLimit", *r.MemoryLimit)
	case r.PidsLimit != nil && *r.PidsLimit < -1:
		return bad("PidsLimit", *r.PidsLimit)
	}
	return nil
}

// limitString writes a limit as v2 files (and v1 pids.max) take it.
func limitString(v int64) string {
	if v == -1 {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

// parseLimit reads a limit: "max", "-1" or anything from unlimitedFrom
// on is -1.
func parseLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" || s == "-1" {
		return -1, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, err
	}
	if v >= unlimitedFrom {
		return -1, nil
	}
	return int64(v), nil
}

// parseCPUMax splits a v2 cpu.max value into quota (-1 for "max") and
// period.
func parseCPUMax(s string) (int64, uint64, error) {
	q, p, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok {
		return 0, 0, fmt.Errorf("cpu.max %q: want \"<quota> <period>\"", s)
	}
	quota, err := parseLimit(q)
	if err != nil {
		return 0, 0, fmt.Errorf("cpu.max %q: %w", s, err)
	}
	period, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("cpu.max %q: %w", s, err)
	}
	return quota, period, nil
}
