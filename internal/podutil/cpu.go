package podutil

// The kubelet's CPU units on Linux cgroups, shared by what writes CPU
// settings to the runtime and what reads them back.
const (
	// MinShares is the fewest CPU shares a cgroup takes.
	MinShares = 2
	// SharesPerCPU are the CPU shares of one CPU.
	SharesPerCPU = 1024
	// MilliCPUPerCPU are the milli-CPUs of one CPU.
	MilliCPUPerCPU = 1000
	// QuotaPeriod is the CFS period the kubelet sets, in µs (100 ms).
	QuotaPeriod = 100000
	// MinQuota is the smallest CFS quota it sets, in µs (1 ms).
	MinQuota = 1000
	// MinMilliCPULimit is the smallest CPU limit a CFS quota stands for
	// as the kubelet reads it back.
	MinMilliCPULimit = 10
)

// MilliCPUToShares is the CPU shares of a CPU request, at least MinShares.
func MilliCPUToShares(milliCPU int64) int64 {
	return max(milliCPU*SharesPerCPU/MilliCPUPerCPU, MinShares)
}

// MilliCPUToQuota is the CFS quota of a CPU limit over period µs, at
// least MinQuota.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	return max(milliCPU*period/MilliCPUPerCPU, MinQuota)
}

// SharesToMilliCPU is the CPU request that CPU shares stand for, rounded
// up to a milli-CPU; 0 (none) below MinShares.
func SharesToMilliCPU(shares int64) int64 {
	if shares < MinShares {
		return 0
	}
	return (shares*MilliCPUPerCPU + SharesPerCPU - 1) / SharesPerCPU
}

// QuotaToMilliCPU is the CPU limit a CFS quota over period stands for; 0
// (none) without a period or with quota -1 (unlimited).
func QuotaToMilliCPU(quota, period int64) int64 {
	if period <= 0 || quota == -1 {
		return 0
	}
	return quota * MilliCPUPerCPU / period
}
