package podutil

import "testing"

func TestCPUConversions(t *testing.T) {
	for _, tc := range []struct {
		milli, shares, back int64
	}{{0, 2, 2}, {1, 2, 2}, {100, 102, 100}, {250, 256, 250}, {1000, 1024, 1000}, {1500, 1536, 1500}} {
		if got := MilliCPUToShares(tc.milli); got != tc.shares {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tc.milli, got, tc.shares)
		}
		if got := SharesToMilliCPU(tc.shares); got != tc.back {
			t.Errorf("SharesToMilliCPU(%d) = %d, want %d", tc.shares, got, tc.back)
		}
	}
	if got := SharesToMilliCPU(1); got != 0 {
		t.Errorf("SharesToMilliCPU(1) = %d, want 0", got)
	}
	for _, tc := range []struct{ milli, quota int64 }{{1, MinQuota}, {250, 25000}, {2000, 200000}} {
		if got := MilliCPUToQuota(tc.milli, QuotaPeriod); got != tc.quota {
			t.Errorf("MilliCPUToQuota(%d) = %d, want %d", tc.milli, got, tc.quota)
		}
		if tc.quota != MinQuota {
			if got := QuotaToMilliCPU(tc.quota, QuotaPeriod); got != tc.milli {
				t.Errorf("QuotaToMilliCPU(%d) = %d, want %d", tc.quota, got, tc.milli)
			}
		}
	}
	if QuotaToMilliCPU(-1, QuotaPeriod) != 0 || QuotaToMilliCPU(5000, 0) != 0 {
		t.Error("no limit: want 0")
	}
}
