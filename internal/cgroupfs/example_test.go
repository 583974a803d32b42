package cgroupfs_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/internal/cgroupfs"
)

// A pod cgroup on a cgroup v2 mount, here a temporary directory laid out
// like one.
func Example() {
	mount, err := os.MkdirTemp("", "cgroupfs-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(mount)
	if err := os.WriteFile(filepath.Join(mount, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}

	m, err := cgroupfs.New(mount)
	if err != nil {
		fmt.Println(err)
		return
	}
	pod := "/kubepods/burstable/pod0f1e"
	// A pod requesting one CPU, limited to half a CPU and 256 MiB.
	err = m.Ensure(pod, cgroupfs.Resources{
		CPUShares:   new(uint64(1024)),
		CPUQuota:    new(int64(50000)),
		CPUPeriod:   new(uint64(100000)),
		MemoryLimit: new(int64(256 << 20)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range []string{"cpu.weight", "cpu.max", "memory.max"} {
		data, _ := os.ReadFile(filepath.Join(mount, pod, f))
		fmt.Printf("%s: %s\n", f, data)
	}
	r, _ := m.Get(pod)
	fmt.Println("shares read back:", *r.CPUShares)

	pods, _ := m.Children("/kubepods/burstable")
	fmt.Println("pods:", pods)
	fmt.Println("remove:", m.Remove(pod), "exists:", m.Exists(pod))
	// Output:
	// cpu.weight: 39
	// cpu.max: 50000 100000
	// memory.max: 268435456
	// shares read back: 998
	// pods: [pod0f1e]
	// remove: <nil> exists: false
}
