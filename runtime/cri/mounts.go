package cri

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/beneath"
)

// maxTerminationMessage is how much of a termination message the kubelet
// reads (4 KiB); maxFallbackLines and maxFallbackBytes bound the log tail
// used under FallbackToLogsOnError.
const (
	maxTerminationMessage = 4096
	maxFallbackLines      = 80
	maxFallbackBytes      = 2048
)

// mounts turns a container's volumeMounts into CRI mounts through the
// Volumes seam, confining every subPath to its volume.
func (r *Runtime) mounts(pod *v1.Pod, c *v1.Container, field string, env *envList) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for i, vm := range c.VolumeMounts {
		f := fmt.Sprintf("%s.volumeMounts[%d] (%s)", field, i, vm.Name)
		if !hasVolume(pod, vm.Name) {
			return nil, fmt.Errorf("%s: the pod has no volume named %q", f, vm.Name)
		}
		if r.cfg.Volumes == nil {
			return nil, fmt.Errorf("%s: no volume manager is configured", f)
		}
		hostPath, err := r.cfg.Volumes.HostPath(pod, vm.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, env.lookup)
		}
		if sub != "" {
			if hostPath, err = subPath(hostPath, sub); err != nil {
				return nil, fmt.Errorf("%s.subPath: %w", f, err)
			}
		}
		ro := vm.ReadOnly
		if rv, ok := r.cfg.Volumes.(ReadOnlyVolumes); ok && rv.MountReadOnly(pod, vm.Name) {
			ro = true
		}
		m := &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: hostPath, Readonly: ro}
		if vm.MountPropagation != nil {
			switch *vm.MountPropagation {
			case v1.MountPropagationHostToContainer:
				m.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case v1.MountPropagationBidirectional:
				m.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			}
		}
		out = append(out, m)
	}
	return out, nil
}

func hasVolume(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return true
		}
	}
	return false
}

// subPath resolves sub beneath the volume directory base and returns the
// host path to mount. sub must be relative with no ".."; missing
// directories are created, as the kubelet does, with base's mode (its
// permission, setuid, setgid and sticky bits), but only beneath base:
// resolution and creation go through descriptors (internal/beneath), so a
// symlink that leads out of the volume is refused before anything is
// made. The path returned is the canonical one read back from the opened
// descriptor, free of symlinks.
//
// The kubelet goes one step further: it bind-mounts the descriptor
// (/proc/<pid>/fd/N) onto a private path and hands the runtime that, so a
// container cannot swap a component for a symlink between the check and
// the runtime's mount. That needs mount privilege and an unmount at
// teardown; and a /proc/<pid>/fd path handed to a CRI runtime directly
// would not help, since the runtime resolves the host path itself when it
// creates the container (containerd does) and may see another PID
// namespace. nodekit hands the canonical path and leaves that window.
func subPath(base, sub string) (string, error) {
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("%q must be a relative path", sub)
	}
	for _, el := range strings.Split(filepath.ToSlash(sub), "/") {
		if el == ".." {
			return "", fmt.Errorf("%q must not contain '..'", sub)
		}
	}
	// The directories made get the volume's own mode, setgid and sticky
	// bits included, as the kubelet gives them: an emptyDir's 0777 (with
	// the setgid bit of an fsGroup), so any user of the pod can write.
	st, err := os.Stat(base)
	if err != nil {
		return "", err
	}
	perm := st.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	p, err := beneath.MkdirAll(base, filepath.ToSlash(sub), perm)
	if errors.Is(err, beneath.ErrEscapes) {
		return "", fmt.Errorf("%q resolves outside its volume", sub)
	}
	return p, err
}

// terminationMessageMount creates the host file the container writes its
// termination message to and mounts it at the terminationMessagePath.
func (r *Runtime) terminationMessageMount(pod *v1.Pod, c *v1.Container) (*runtimeapi.Mount, error) {
	if c.TerminationMessagePath == "" {
		return nil, nil
	}
	podDir, err := r.podDir(pod)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(podDir, "containers", c.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("termination message directory: %w", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	path := filepath.Join(dir, hex.EncodeToString(b[:]))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o666)
	if err != nil {
		return nil, fmt.Errorf("termination message file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	// The mode is set explicitly so the umask cannot stop a non-root
	// container from writing its message.
	if err := os.Chmod(path, 0o666); err != nil {
		return nil, err
	}
	return &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: path}, nil
}

// terminationMessage reads what an exited container left: its message
// file, or under FallbackToLogsOnError after a failure with no message,
// the tail of its log.
func terminationMessage(st *runtimeapi.ContainerStatus) string {
	a := st.GetAnnotations()
	target := a[AnnotationTerminationMessagePath]
	var msg string
	if target != "" {
		for _, m := range st.GetMounts() {
			if m.GetContainerPath() == target {
				msg = readCapped(m.GetHostPath(), maxTerminationMessage)
				break
			}
		}
	}
	if msg == "" && st.GetExitCode() != 0 && a[AnnotationTerminationMessagePolicy] == string(v1.TerminationMessageFallbackToLogsOnError) {
		msg = logTail(st.GetLogPath())
	}
	return msg
}

func readCapped(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, n)
	k, _ := f.Read(buf)
	return string(buf[:k])
}

// Bounds of the log tail read for FallbackToLogsOnError: blocks of
// tailBlock bytes are read from the end until the complete lines in hand
// hold maxFallbackLines lines or maxFallbackBytes of content, or
// maxTailRead bytes were read (containerd splits log lines at 16 KiB, so
// this holds several whole lines whatever they are).
const (
	tailBlock   = 8 << 10
	maxTailRead = 64 << 10
)

// logTail returns the content of the last lines of a CRI log file,
// without the CRI prefixes, joining partial lines: at most
// maxFallbackLines lines and the last maxFallbackBytes bytes. It reads
// the file from its end, at most maxTailRead bytes of it.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	return tailOf(f, st.Size())
}

// tailOf is logTail over the size bytes of r.
func tailOf(r io.ReaderAt, size int64) string {
	var buf []byte
	off := size
	for off > 0 && len(buf) < maxTailRead {
		n := min(int64(tailBlock), off)
		off -= n
		chunk := make([]byte, n, int(n)+len(buf))
		if _, err := r.ReadAt(chunk, off); err != nil && !errors.Is(err, io.EOF) {
			return ""
		}
		buf = append(chunk, buf...)
		if off == 0 {
			break
		}
		lines, content := completeLines(buf)
		if len(lines) >= maxFallbackLines || len(content) >= maxFallbackBytes {
			break
		}
	}
	var lines [][]byte
	if off == 0 {
		lines = splitLines(buf)
	} else {
		lines, _ = completeLines(buf) // the first line was cut by the window
	}
	s := criContent(lines[max(0, len(lines)-maxFallbackLines):])
	if len(s) > maxFallbackBytes {
		s = s[len(s)-maxFallbackBytes:]
	}
	return s
}

// completeLines returns the lines of buf after its first newline (the
// ones the window holds whole, the last one possibly still being
// written) and their content.
func completeLines(buf []byte) ([][]byte, string) {
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		return nil, ""
	}
	lines := splitLines(buf[i+1:])
	return lines, criContent(lines)
}

func splitLines(b []byte) [][]byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	if len(b) == 0 {
		return nil
	}
	return bytes.Split(b, []byte{'\n'})
}

// criContent joins the content of CRI log lines
// ("<timestamp> <stream> <P|F> <content>"): a full line (F) ends with a
// newline, a partial one (P) continues on the next line.
func criContent(lines [][]byte) string {
	var out strings.Builder
	for _, line := range lines {
		parts := bytes.SplitN(line, []byte{' '}, 4)
		if len(parts) < 4 {
			continue
		}
		out.Write(parts[3])
		if string(parts[2]) == "F" {
			out.WriteByte('\n')
		}
	}
	return out.String()
}
