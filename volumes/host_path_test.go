package volumes_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/volumes"
)

func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	missing := filepath.Join(dir, "missing")
	block := ""
	devs, _ := os.ReadDir("/dev")
	for _, d := range devs {
		p := filepath.Join("/dev", d.Name())
		if st, err := os.Stat(p); err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
			block = p
			break
		}
	}
	for _, tc := range []struct {
		typ  v1.HostPathType
		path string
		want string // error; "" for none
	}{
		{v1.HostPathUnset, missing, ""},
		{v1.HostPathDirectory, dir, ""},
		{v1.HostPathDirectory, file, fmt.Sprintf("hostPath type check failed: %s is not a directory, it's a File", file)},
		{v1.HostPathDirectory, missing, fmt.Sprintf("hostPath type check failed, %s is not a directory, unable to determine its type: path %q does not exist", missing, missing)},
		{v1.HostPathFile, file, ""},
		{v1.HostPathFile, dir, fmt.Sprintf("hostPath type check failed: %s is not a file, it's a Directory", dir)},
		{v1.HostPathSocket, sock, ""},
		{v1.HostPathSocket, file, fmt.Sprintf("hostPath type check failed: %s is not a socket file, it's a File", file)},
		{v1.HostPathCharDev, "/dev/null", ""},
		{v1.HostPathCharDev, file, fmt.Sprintf("hostPath type check failed: %s is not a character device, it's a File", file)},
		{v1.HostPathBlockDev, "/dev/null", "hostPath type check failed: /dev/null is not a block device, it's a CharDevice"},
		{v1.HostPathBlockDev, block, ""},
		{v1.HostPathFileOrCreate, file, ""},
		{v1.HostPathFileOrCreate, dir, fmt.Sprintf("hostPath type check failed: %s is not a file, it's a Directory", dir)},
		{v1.HostPathFileOrCreate, filepath.Join(missing, "f"), fmt.Sprintf("open %s: no such file or directory", filepath.Join(missing, "f"))},
		{v1.HostPathDirectoryOrCreate, file, fmt.Sprintf("hostPath type check failed: %s is not a directory, it's a File", file)},
		{"Bogus", dir, "Bogus is an invalid volume type"},
		{v1.HostPathUnset, "/a/../etc", "invalid HostPath `/a/../etc`: must not contain '..'"},
	} {
		t.Run(string(tc.typ)+" "+tc.path, func(t *testing.T) {
			if tc.path == "" {
				testenv.Privileged.Missing(t)("no block device in /dev on this machine")
			}
			got, err := setUpHostPath(tc.path, tc.typ)
			if tc.want == "" {
				if err != nil || got != tc.path {
					t.Fatalf("SetUp = %q, %v; want the host path", got, err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("SetUp error = %v\nwant %s", err, tc.want)
			}
		})
	}
}

func setUpHostPath(path string, typ v1.HostPathType) (string, error) {
	v := hostPathVol("h", path, typ)
	pod := podWith("hp", []v1.Volume{v}, mountOf("h"))
	return volumes.NewHostPath().SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: &pod.Spec.Volumes[0], Dir: "/nonexistent/dir"})
}

func TestHostPathCreates(t *testing.T) {
	dir := t.TempDir()
	newDir := filepath.Join(dir, "a", "b")
	if _, err := setUpHostPath(newDir, v1.HostPathDirectoryOrCreate); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(newDir); err != nil || !st.IsDir() || st.Mode().Perm()&^0o755 != 0 {
		t.Fatalf("DirectoryOrCreate made %v, %v; want a directory of mode 0755 at most", st, err)
	}
	newFile := filepath.Join(dir, "f")
	if _, err := setUpHostPath(newFile, v1.HostPathFileOrCreate); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(newFile); err != nil || !st.Mode().IsRegular() || st.Size() != 0 || st.Mode().Perm()&^0o644 != 0 {
		t.Fatalf("FileOrCreate made %v, %v; want an empty file of mode 0644 at most", st, err)
	}
	// TearDown leaves the host path alone.
	if err := volumes.NewHostPath().TearDown(context.Background(), newDir); err != nil || !exists(newDir) {
		t.Fatalf("TearDown = %v; exists %v", err, exists(newDir))
	}
}
