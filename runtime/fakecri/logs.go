package fakecri

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// writeLog appends text to a CRI log file, one full ("F") line per text
// line, in the format the kubelet and crictl read:
//
//	2016-10-06T00:17:09.669794202Z stdout F log content
//
// The file is created even when text is empty, as a runtime creates it when
// the container starts.
func writeLog(path string, ts time.Time, stream, text string) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if text != "" {
		stamp := ts.UTC().Format(time.RFC3339Nano)
		for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			sb.WriteString(stamp + " " + stream + " F " + line + "\n")
		}
	}
	_, werr := f.WriteString(sb.String())
	return errors.Join(werr, f.Close())
}

// writeTerminationMessage writes msg to the host side of the mount that
// holds the container's termination message path.
func writeTerminationMessage(cfg *runtimeapi.ContainerConfig, msg string) error {
	target := cfg.GetAnnotations()["io.kubernetes.container.terminationMessagePath"]
	if target == "" {
		target = "/dev/termination-log"
	}
	for _, m := range cfg.GetMounts() {
		if m.GetContainerPath() == target && m.GetHostPath() != "" {
			return os.WriteFile(m.GetHostPath(), []byte(msg), 0o644)
		}
	}
	return nil
}
