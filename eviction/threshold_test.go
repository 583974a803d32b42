package eviction_test

import (
	"strings"
	"testing"

	"github.com/nodekit/nodekit/eviction"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		spec    eviction.Spec
		want    []string // Threshold.String() and grace, in order
		wantErr string   // a substring naming the field
	}{
		{name: "defaults", spec: eviction.Spec{Hard: eviction.DefaultHard()},
			want: []string{"imagefs.available<15% 0s", "imagefs.inodesFree<5% 0s", "memory.available<100Mi 0s", "nodefs.available<10% 0s", "nodefs.inodesFree<5% 0s"}},
		{name: "soft with grace", spec: eviction.Spec{
			Hard: map[string]string{"memory.available": "100Mi"}, Soft: map[string]string{"memory.available": "300Mi", "pid.available": "10%"},
			SoftGracePeriod: map[string]string{"memory.available": "1m30s", "pid.available": "10s"},
		}, want: []string{"memory.available<100Mi 0s", "memory.available<300Mi 1m30s", "pid.available<10% 10s"}},
		{name: "0% and 100% disable", spec: eviction.Spec{Hard: map[string]string{"nodefs.available": "0%", "imagefs.available": "100%"}}, want: []string{}},
		{name: "unknown signal", spec: eviction.Spec{Hard: map[string]string{"memory.free": "1Gi"}}, wantErr: `evictionHard: unsupported eviction signal "memory.free"`},
		{name: "bad quantity", spec: eviction.Spec{Hard: map[string]string{"memory.available": "lots"}}, wantErr: `evictionHard[memory.available]: "lots" is not a quantity`},
		{name: "zero quantity", spec: eviction.Spec{Hard: map[string]string{"memory.available": "0"}}, wantErr: "evictionHard[memory.available]: quantity 0 must be positive"},
		{name: "negative quantity", spec: eviction.Spec{Soft: map[string]string{"memory.available": "-1Mi"}}, wantErr: "evictionSoft[memory.available]: quantity -1Mi must be positive"},
		{name: "percentage over 100", spec: eviction.Spec{Hard: map[string]string{"nodefs.available": "120%"}}, wantErr: "evictionHard[nodefs.available]: percentage 120% must be in"},
		{name: "bad percentage", spec: eviction.Spec{Hard: map[string]string{"nodefs.available": "x%"}}, wantErr: `evictionHard[nodefs.available]: "x%" is not a percentage`},
		{name: "soft without grace", spec: eviction.Spec{Soft: map[string]string{"memory.available": "1Gi"}}, wantErr: "evictionSoftGracePeriod[memory.available]: a soft threshold needs a grace period"},
		{name: "bad grace", spec: eviction.Spec{SoftGracePeriod: map[string]string{"memory.available": "soon"}}, wantErr: "evictionSoftGracePeriod[memory.available]: time: invalid duration"},
		{name: "negative grace", spec: eviction.Spec{SoftGracePeriod: map[string]string{"memory.available": "-1s"}}, wantErr: "evictionSoftGracePeriod[memory.available]: -1s is negative"},
		{name: "grace for unknown signal", spec: eviction.Spec{SoftGracePeriod: map[string]string{"disk": "1s"}}, wantErr: `evictionSoftGracePeriod: unsupported eviction signal "disk"`},
		{name: "negative min reclaim", spec: eviction.Spec{MinimumReclaim: map[string]string{"memory.available": "-1Mi"}}, wantErr: "evictionMinimumReclaim[memory.available]: quantity -1Mi must be positive"},
		{name: "min reclaim for unknown signal", spec: eviction.Spec{MinimumReclaim: map[string]string{"cpu": "1"}}, wantErr: `evictionMinimumReclaim: unsupported eviction signal "cpu"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := eviction.Parse(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, th := range ts {
				got = append(got, th.String()+" "+th.GracePeriod.String())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("Parse = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseMinimumReclaimApplies(t *testing.T) {
	ts, err := eviction.Parse(eviction.Spec{Hard: map[string]string{"memory.available": "100Mi"}, MinimumReclaim: map[string]string{"memory.available": "50Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].MinReclaim == nil || ts[0].MinReclaim.String() != "50Mi" {
		t.Fatalf("thresholds %+v, want memory.available with a 50Mi minimum reclaim", ts)
	}
}

func TestParseFlag(t *testing.T) {
	m, err := eviction.ParseFlag("--eviction-hard", "memory.available<100Mi, nodefs.available<10%", "<")
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m["memory.available"] != "100Mi" || m["nodefs.available"] != "10%" {
		t.Errorf("ParseFlag = %v", m)
	}
	g, err := eviction.ParseFlag("--eviction-soft-grace-period", "memory.available=1m30s", "=")
	if err != nil || g["memory.available"] != "1m30s" {
		t.Errorf("ParseFlag grace = %v, %v", g, err)
	}
	for _, bad := range []string{"memory.available", "memory.available<", "<1Gi", "memory.available<1Gi,memory.available<2Gi"} {
		if _, err := eviction.ParseFlag("--eviction-hard", bad, "<"); err == nil || !strings.Contains(err.Error(), "--eviction-hard") {
			t.Errorf("ParseFlag(%q) error %v, want one naming --eviction-hard", bad, err)
		}
	}
}
