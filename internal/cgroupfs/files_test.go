package cgroupfs_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodekit/nodekit/internal/cgroupfs"
)

func TestCPUSharesToWeight(t *testing.T) {
	for _, tc := range []struct{ shares, weight uint64 }{
		{0, 1}, // below the minimum: clamped, no underflow
		{2, 1},
		{1024, 39},
		{262144, 10000},
		{1 << 20, 10000},
	} {
		if got := cgroupfs.CPUSharesToWeight(tc.shares); got != tc.weight {
			t.Errorf("CPUSharesToWeight(%d) = %d, want %d", tc.shares, got, tc.weight)
		}
	}
	for _, tc := range []struct{ weight, shares uint64 }{
		{0, 2},
		{1, 2},
		{39, 998}, // the round trip from 1024 loses a little, as the kubelet's
		{10000, 262144},
	} {
		if got := cgroupfs.CPUWeightToShares(tc.weight); got != tc.shares {
			t.Errorf("CPUWeightToShares(%d) = %d, want %d", tc.weight, got, tc.shares)
		}
	}
}

func TestFiles(t *testing.T) {
	all := cgroupfs.Resources{
		CPUShares:   new(uint64(1024)),
		CPUQuota:    new(int64(-1)),
		CPUPeriod:   new(uint64(100000)),
		MemoryLimit: new(int64(-1)),
		PidsLimit:   new(int64(1024)),
	}
	for _, tc := range []struct {
		name string
		r    cgroupfs.Resources
		v1   []cgroupfs.File
		v2   []cgroupfs.File
	}{
		{name: "nothing"},
		{
			// Memory first, the period before the quota.
			name: "all", r: all,
			v1: []cgroupfs.File{
				{Controller: "memory", Name: "memory.limit_in_bytes", Value: "-1"},
				{Controller: "pids", Name: "pids.max", Value: "1024"},
				{Controller: "cpu", Name: "cpu.shares", Value: "1024"},
				{Controller: "cpu", Name: "cpu.cfs_period_us", Value: "100000"},
				{Controller: "cpu", Name: "cpu.cfs_quota_us", Value: "-1"},
			},
			v2: []cgroupfs.File{
				{Controller: "memory", Name: "memory.max", Value: "max"},
				{Controller: "pids", Name: "pids.max", Value: "1024"},
				{Controller: "cpu", Name: "cpu.weight", Value: "39"},
				{Controller: "cpu", Name: "cpu.max", Value: "max 100000"},
			},
		},
		{
			name: "quota alone", r: cgroupfs.Resources{CPUQuota: new(int64(20000)), PidsLimit: new(int64(-1))},
			v1: []cgroupfs.File{
				{Controller: "pids", Name: "pids.max", Value: "max"},
				{Controller: "cpu", Name: "cpu.cfs_quota_us", Value: "20000"},
			},
			v2: []cgroupfs.File{
				{Controller: "pids", Name: "pids.max", Value: "max"},
				{Controller: "cpu", Name: "cpu.max", Value: "20000 100000"},
			},
		},
		{
			name: "period alone", r: cgroupfs.Resources{CPUPeriod: new(uint64(50000)), MemoryLimit: new(int64(1 << 30))},
			v1: []cgroupfs.File{
				{Controller: "memory", Name: "memory.limit_in_bytes", Value: "1073741824"},
				{Controller: "cpu", Name: "cpu.cfs_period_us", Value: "50000"},
			},
			v2: []cgroupfs.File{
				{Controller: "memory", Name: "memory.max", Value: "1073741824"},
				{Controller: "cpu", Name: "cpu.max", Value: "max 50000"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v1, err := cgroupfs.V1Files(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.v1, v1); d != "" {
				t.Errorf("V1Files (-want +got):\n%s", d)
			}
			v2, err := cgroupfs.V2Files(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.v2, v2); d != "" {
				t.Errorf("V2Files (-want +got):\n%s", d)
			}
		})
	}
	if _, err := cgroupfs.V2Files(cgroupfs.Resources{MemoryLimit: new(int64(-3))}); !errors.Is(err, cgroupfs.ErrInvalid) {
		t.Errorf("V2Files of a bad limit: got %v, want ErrInvalid", err)
	}
}
