package kube

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"
)

func TestHostResources(t *testing.T) {
	proc := t.TempDir()
	meminfo := "MemFree:         1000 kB\nMemTotal:        2048 kB\n"
	if err := os.WriteFile(filepath.Join(proc, "meminfo"), []byte(meminfo), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := HostResources{RootDir: t.TempDir(), ProcDir: proc}.Capacity()
	if err != nil {
		t.Fatal(err)
	}
	if q := got[v1.ResourceMemory]; q.Value() != 2048*1024 {
		t.Errorf("memory = %s, want 2Mi", q.String())
	}
	if q := got[v1.ResourceCPU]; q.Value() != int64(goruntime.NumCPU()) {
		t.Errorf("cpu = %s, want %d", q.String(), goruntime.NumCPU())
	}
	if q := got[v1.ResourceEphemeralStorage]; q.Value() <= 0 {
		t.Errorf("ephemeral-storage = %s, want the file system's size", q.String())
	}

	for name, content := range map[string]string{"no MemTotal": "MemFree: 1 kB\n", "bad number": "MemTotal: x kB\n", "bad unit": "MemTotal: 1 MB\n"} {
		if err := os.WriteFile(filepath.Join(proc, "meminfo"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := (HostResources{ProcDir: proc}).Capacity(); err == nil || !strings.Contains(err.Error(), "meminfo") {
			t.Errorf("%s: err = %v, want one naming meminfo", name, err)
		}
	}
	if _, err := (HostResources{ProcDir: proc, RootDir: filepath.Join(proc, "missing")}).Capacity(); err == nil {
		t.Error("a missing root dir gave no error")
	}
}

func TestAllocatableNeverNegative(t *testing.T) {
	got := allocatable(
		v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
		v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("256Mi"), "example.com/gpu": resource.MustParse("1")},
	)
	if q := got[v1.ResourceCPU]; q.Sign() != 0 {
		t.Errorf("cpu = %s, want 0", q.String())
	}
	if q := got[v1.ResourceMemory]; q.Cmp(resource.MustParse("768Mi")) != 0 {
		t.Errorf("memory = %s, want 768Mi", q.String())
	}
	if _, ok := got["example.com/gpu"]; ok {
		t.Error("a reserved resource without capacity appeared in allocatable")
	}
}

func TestHostSystemInfo(t *testing.T) {
	info, err := HostSystemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if info.OperatingSystem != goruntime.GOOS || info.Architecture != goruntime.GOARCH || info.KernelVersion == "" || info.OSImage == "" {
		t.Fatalf("HostSystemInfo = %+v", info)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil && info.BootID != strings.TrimSpace(string(b)) {
		t.Errorf("bootID = %q, want %q", info.BootID, strings.TrimSpace(string(b)))
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "os-release")
	if err := os.WriteFile(f, []byte("NAME=X\nPRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := osImage(f); got != "Debian GNU/Linux 13 (trixie)" {
		t.Errorf("osImage = %q", got)
	}
}

func TestNodeConfigValidation(t *testing.T) {
	client := fake.NewClientset()
	for name, tc := range map[string]struct {
		cfg  NodeConfig
		want string
	}{
		"no client":       {NodeConfig{Name: "n"}, "Client"},
		"no name":         {NodeConfig{Client: client}, "Name"},
		"bad name":        {NodeConfig{Client: client, Name: "Not_A_Name"}, "Name"},
		"bad port":        {NodeConfig{Client: client, Name: "n", DaemonPort: 70000}, "DaemonPort"},
		"negative pods":   {NodeConfig{Client: client, Name: "n", MaxPods: -1}, "MaxPods"},
		"negative period": {NodeConfig{Client: client, Name: "n", NodeStatusUpdateFrequency: -time.Second}, "NodeStatusUpdateFrequency"},
		"renew too slow":  {NodeConfig{Client: client, Name: "n", LeaseDuration: 10 * time.Second, LeaseRenewInterval: 10 * time.Second}, "LeaseRenewInterval"},
		"lease too short": {NodeConfig{Client: client, Name: "n", LeaseDuration: 500 * time.Millisecond, LeaseRenewInterval: 100 * time.Millisecond}, "LeaseDuration"},
	} {
		_, err := NewNode(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewNode = %v; want an error naming %s", name, err, tc.want)
		}
	}
	n, err := NewNode(NodeConfig{Client: client, Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	c := n.cfg
	if c.Hostname != "n" || c.MaxPods != 110 || c.DaemonPort != 10250 || c.KubeletVersion != DefaultKubeletVersion ||
		c.NodeStatusUpdateFrequency != 10*time.Second || c.NodeStatusReportFrequency != 5*time.Minute ||
		c.LeaseDuration != 40*time.Second || c.LeaseRenewInterval != 10*time.Second {
		t.Fatalf("defaults = %+v", c)
	}
}
