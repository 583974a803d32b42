package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// HostPathPluginName is the hostPath plugin's name, the kubelet's.
const HostPathPluginName = "kubernetes.io/host-path"

// HostPath is the hostPath plugin: the volume is a path on the host,
// mounted as it is. SetUp checks the path against the volume's type as
// the kubelet does, creating it for DirectoryOrCreate (mode 0755, with
// missing parents) and FileOrCreate (mode 0644; its parent must exist),
// and returns the path itself. TearDown leaves the host path alone. Its
// volumes are not managed: the pod's fsGroup does not touch the host's
// files. Safe for concurrent use.
type HostPath struct{}

var _ Plugin = (*HostPath)(nil)

// NewHostPath returns the hostPath plugin. It needs nothing from a
// PluginConfig: it mounts nothing and reads no object.
func NewHostPath() *HostPath { return &HostPath{} }

// Name implements Plugin.
func (*HostPath) Name() string { return HostPathPluginName }

// CanSupport implements Plugin: volumes with a hostPath source.
func (*HostPath) CanSupport(v *v1.Volume) bool { return v.HostPath != nil }

// Attributes implements Plugin: not managed.
func (*HostPath) Attributes(*v1.Volume) Attributes { return Attributes{} }

// SetUp implements Plugin. Errors are the kubelet's: "invalid HostPath
// `p`: must not contain '..'", "hostPath type check failed: p is not a
// directory, it's a File", "... unable to determine its type: path "p"
// does not exist", "X is an invalid volume type".
func (*HostPath) SetUp(_ context.Context, req *Request) (string, error) {
	p := req.Volume.HostPath.Path
	if slices.Contains(strings.Split(p, "/"), "..") {
		return "", fmt.Errorf("invalid HostPath `%s`: must not contain '..'", p)
	}
	if p == "" {
		return "", errors.New("invalid HostPath ``: the path is empty")
	}
	var typ v1.HostPathType
	if t := req.Volume.HostPath.Type; t != nil {
		typ = *t
	}
	if err := checkHostPathType(p, typ); err != nil {
		return "", err
	}
	return p, nil
}

// TearDown implements Plugin: nothing to undo on the host.
func (*HostPath) TearDown(context.Context, string) error { return nil }

// checkHostPathType checks p against typ, creating it for the OrCreate
// types, as the kubelet's hostPath type checker.
func checkHostPathType(p string, typ v1.HostPathType) error {
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !pathExists(p) {
			return os.MkdirAll(p, 0o755)
		}
		return typeIs(p, v1.HostPathDirectory, "directory")
	case v1.HostPathDirectory:
		return typeIs(p, v1.HostPathDirectory, "directory")
	case v1.HostPathFileOrCreate:
		if !pathExists(p) {
			f, err := os.OpenFile(p, os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		return typeIs(p, v1.HostPathFile, "file")
	case v1.HostPathFile:
		return typeIs(p, v1.HostPathFile, "file")
	case v1.HostPathSocket:
		return typeIs(p, v1.HostPathSocket, "socket file")
	case v1.HostPathCharDev:
		return typeIs(p, v1.HostPathCharDev, "character device")
	case v1.HostPathBlockDev:
		return typeIs(p, v1.HostPathBlockDev, "block device")
	default:
		return fmt.Errorf("%s is an invalid volume type", typ)
	}
}

// pathExists reports whether p exists, following symlinks.
func pathExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func typeIs(p string, want v1.HostPathType, expected string) error {
	got, err := fileType(p)
	if err != nil {
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: %w", p, expected, err)
	}
	if got != want {
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it's a %s", p, expected, got)
	}
	return nil
}

// fileType names what p is (following symlinks) with the HostPathType
// names.
func fileType(p string) (v1.HostPathType, error) {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("path %q does not exist", p)
	}
	if err != nil {
		return "", err
	}
	m := st.Mode()
	switch {
	case m.IsDir():
		return v1.HostPathDirectory, nil
	case m.IsRegular():
		return v1.HostPathFile, nil
	case m&fs.ModeSocket != 0:
		return v1.HostPathSocket, nil
	case m&fs.ModeCharDevice != 0:
		return v1.HostPathCharDev, nil
	case m&fs.ModeDevice != 0:
		return v1.HostPathBlockDev, nil
	}
	return "", errors.New("only recognise file, directory, socket, block device and character device")
}
