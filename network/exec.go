package network

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// pluginExec runs CNI plugins as processes. Unlike libcni's default it
// starts each in its own process group and kills the whole group when
// the context ends, so a plugin that hangs in a child (a shell script's
// sleep, a helper it forked) cannot hold the caller past its deadline.
type pluginExec struct {
	version.PluginDecoder
}

var _ invoke.Exec = (*pluginExec)(nil)

// ExecPlugin runs the plugin at path with stdin and environ and returns
// its standard output. A plugin that fails returns the CNI error it
// printed (a *types.Error); one killed because ctx ended returns an
// error wrapping ctx.Err().
func (e *pluginExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = environ
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The negative pid names the process group the plugin leads.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = killWait
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("plugin %s killed: %w", filepath.Base(path), cerr)
	}
	return nil, pluginError(err, stdout.Bytes(), stderr.Bytes())
}

// pluginError turns a failed run into the CNI error the plugin printed
// on its standard output, or a description of what it left.
func pluginError(err error, stdout, stderr []byte) error {
	var ee *exec.ExitError
	if len(stdout) > 0 {
		var cerr types.Error
		if jerr := json.Unmarshal(stdout, &cerr); jerr == nil && cerr.Msg != "" {
			return &cerr
		}
		return fmt.Errorf("%w; its output is not a CNI error: %q", err, truncate(stdout))
	}
	if len(stderr) > 0 {
		return fmt.Errorf("%w: %q", err, truncate(stderr))
	}
	if errors.As(err, &ee) {
		return fmt.Errorf("%w, with no error message", err)
	}
	return err
}

func truncate(b []byte) string {
	const max = 512
	b = bytes.TrimSpace(b)
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}

// FindInPath returns the path of plugin in the first of dirs holding it.
func (e *pluginExec) FindInPath(plugin string, dirs []string) (string, error) {
	return invoke.FindInPath(plugin, dirs)
}
