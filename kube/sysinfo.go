package kube

import (
	"bufio"
	"bytes"
	"os"
	goruntime "runtime"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// HostSystemInfo describes the machine it runs on, as the kubelet does:
// kernel release from uname, OS image from PRETTY_NAME in /etc/os-release,
// boot ID from /proc/sys/kernel/random/boot_id, machine ID from
// /etc/machine-id (or /var/lib/dbus/machine-id), system UUID from
// /sys/class/dmi/id/product_uuid when readable, and the Go OS and
// architecture. A file it cannot read leaves its field empty: none of them
// is required by the API server.
func HostSystemInfo() (v1.NodeSystemInfo, error) {
	info := v1.NodeSystemInfo{
		OperatingSystem: goruntime.GOOS,
		Architecture:    goruntime.GOARCH,
		BootID:          readTrimmed("/proc/sys/kernel/random/boot_id"),
		MachineID:       readTrimmed("/etc/machine-id"),
		SystemUUID:      strings.ToLower(readTrimmed("/sys/class/dmi/id/product_uuid")),
		OSImage:         osImage("/etc/os-release"),
	}
	if info.MachineID == "" {
		info.MachineID = readTrimmed("/var/lib/dbus/machine-id")
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		info.KernelVersion = unix.ByteSliceToString(u.Release[:])
	}
	if info.OSImage == "" {
		info.OSImage = "Unknown"
	}
	return info, nil
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// osImage returns PRETTY_NAME from an os-release file, unquoted.
func osImage(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || k != "PRETTY_NAME" {
			continue
		}
		return strings.Trim(v, `"'`)
	}
	return ""
}
