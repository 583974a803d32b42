package apiservertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestToolsDir(t *testing.T) {
	t.Run("unset skips and names the install script", func(t *testing.T) {
		dir, skip, err := toolsDir("")
		if dir != "" || err != nil || !strings.Contains(skip, "hack/kube/install.sh") {
			t.Fatalf("toolsDir(\"\") = %q, %q, %v; want a skip naming hack/kube/install.sh", dir, skip, err)
		}
	})
	t.Run("set but a binary missing fails", func(t *testing.T) {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, skip, err := toolsDir(d)
		if skip != "" || err == nil || !strings.Contains(err.Error(), "kube-apiserver") || !strings.Contains(err.Error(), "hack/kube/install.sh") {
			t.Fatalf("toolsDir without kube-apiserver = %q, %v; want an error naming kube-apiserver and the script", skip, err)
		}
	})
	t.Run("set but not executable fails", func(t *testing.T) {
		d := t.TempDir()
		for _, n := range []string{"etcd", "kube-apiserver"} {
			if err := os.WriteFile(filepath.Join(d, n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := toolsDir(d); err == nil {
			t.Fatal("toolsDir with non-executable binaries succeeded")
		}
	})
	t.Run("both present", func(t *testing.T) {
		d := t.TempDir()
		for _, n := range []string{"etcd", "kube-apiserver"} {
			if err := os.WriteFile(filepath.Join(d, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if dir, skip, err := toolsDir(d); dir != d || skip != "" || err != nil {
			t.Fatalf("toolsDir = %q, %q, %v; want %q", dir, skip, err, d)
		}
	})
}
