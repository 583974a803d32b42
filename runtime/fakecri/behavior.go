package fakecri

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The environment variables that script a container. They are read from
// the container config's Envs at CreateContainer; a real runtime ignores
// them, so one manifest drives both.
const (
	// EnvExitAfter makes the container exit this long (a Go duration, such
	// as "2s") after it starts. Without it, and without EnvExitCode, the
	// container runs until it is stopped.
	EnvExitAfter = "FAKECRI_EXIT_AFTER"
	// EnvExitCode is the code the container exits with (default 0). Set
	// alone, the container exits as soon as it starts.
	EnvExitCode = "FAKECRI_EXIT_CODE"
	// EnvExitReason is the reason reported on exit, such as "OOMKilled".
	// Empty means the runtime's own: "Completed" for 0, "Error" otherwise.
	EnvExitReason = "FAKECRI_EXIT_REASON"
	// EnvStartError makes StartContainer fail with this message; the
	// container is left exited with code 128 and reason "StartError", as
	// containerd leaves it.
	EnvStartError = "FAKECRI_START_ERROR"
	// EnvIgnoreSIGTERM ("true") makes the container ignore SIGTERM, so
	// StopContainer waits out the whole timeout and then kills it (137).
	EnvIgnoreSIGTERM = "FAKECRI_IGNORE_SIGTERM"
	// EnvStopDelay is how long the container takes to exit after SIGTERM
	// (a Go duration). If the stop timeout is shorter it is killed (137).
	EnvStopDelay = "FAKECRI_STOP_DELAY"
	// EnvTermExitCode is the exit code after a SIGTERM (default 143).
	EnvTermExitCode = "FAKECRI_TERM_EXIT_CODE"
	// EnvExec scripts ExecSync results: a JSON object from the command
	// line (arguments joined by single spaces) to a result, for example
	// {"cat /tmp/healthy": {"exitCode": 1, "stderr": "no such file"}}.
	EnvExec = "FAKECRI_EXEC"
	// EnvExecExitCode is the exit code of commands that EnvExec does not
	// list and that are not built in (default 0).
	EnvExecExitCode = "FAKECRI_EXEC_EXIT_CODE"
	// EnvLog is written to the container's log as stdout when it starts,
	// one log line per text line.
	EnvLog = "FAKECRI_LOG"
	// EnvTerminationMessage is written to the container's termination
	// message file (the host path of the mount at the
	// terminationMessagePath) when it exits.
	EnvTerminationMessage = "FAKECRI_TERMINATION_MESSAGE"
	// EnvMemoryBytes is the memory working set reported in stats.
	EnvMemoryBytes = "FAKECRI_MEMORY_BYTES"
	// EnvCPUNanoCores is the CPU use reported in stats, in billionths of
	// a core (500000000 is half a core).
	EnvCPUNanoCores = "FAKECRI_CPU_NANOCORES"
	// EnvRootfsBytes and EnvRootfsInodes are what the container's
	// writable layer takes on disk, reported in stats and ImageFsInfo
	// until the container is removed.
	EnvRootfsBytes  = "FAKECRI_ROOTFS_BYTES"
	EnvRootfsInodes = "FAKECRI_ROOTFS_INODES"
	// EnvLogBytes and EnvLogInodes are what the container's logs take on
	// the node's filesystem, reported by DiskStats.
	EnvLogBytes  = "FAKECRI_LOG_BYTES"
	EnvLogInodes = "FAKECRI_LOG_INODES"
)

// Behavior scripts what a fake container does. The zero value runs until
// stopped, exits 143 on SIGTERM, answers every exec with exit code 0 and
// reports no resource use.
type Behavior struct {
	// Exit makes the container exit ExitAfter after it starts, with
	// ExitCode and ExitReason.
	Exit       bool
	ExitAfter  time.Duration
	ExitCode   int32
	ExitReason string
	// StartError, when set, makes StartContainer fail with this message.
	StartError string
	// IgnoreSIGTERM makes stops wait for the whole timeout, then kill.
	IgnoreSIGTERM bool
	// StopDelay is how long the container takes to exit after SIGTERM.
	StopDelay time.Duration
	// TermExitCode is the exit code after SIGTERM; nil means 143.
	TermExitCode *int32
	// Exec maps a command line (arguments joined by spaces) to its result.
	Exec map[string]ExecResult
	// ExecExitCode is the exit code of commands not in Exec and not built
	// in ("echo", "true", "false", "env").
	ExecExitCode int32
	// Log is written to the log on start, as stdout lines.
	Log string
	// TerminationMessage is written to the termination message file on
	// exit.
	TerminationMessage string
	// MemoryBytes and CPUNanoCores are the usage figures reported in
	// stats while the container runs.
	MemoryBytes  uint64
	CPUNanoCores uint64
	// Disk is what the container holds on disk: its writable layer
	// (reported while the container exists, exited or not) and its logs.
	Disk DiskUsage
}

// ExecResult is the scripted result of one exec command.
type ExecResult struct {
	ExitCode int32  `json:"exitCode"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Delay is how long the command runs; a delay beyond the exec timeout
	// makes ExecSync fail with DeadlineExceeded.
	Delay Duration `json:"delay"`
}

// Duration is a time.Duration that reads from JSON as a Go duration string.
type Duration time.Duration

// UnmarshalJSON reads "1.5s" or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a duration string such as \"2s\": %w", err)
	}
	*d = Duration(n)
	return nil
}

// BehaviorFromEnv reads a Behavior from FAKECRI_* environment variables.
// The error names the variable that does not parse.
func BehaviorFromEnv(envs []*runtimeapi.KeyValue) (Behavior, error) {
	var b Behavior
	for _, kv := range envs {
		if !strings.HasPrefix(kv.GetKey(), "FAKECRI_") {
			continue
		}
		if err := b.set(kv.GetKey(), string(kv.GetValue())); err != nil {
			return Behavior{}, fmt.Errorf("env %s=%q: %w", kv.GetKey(), string(kv.GetValue()), err)
		}
	}
	return b, nil
}

func (b *Behavior) set(key, val string) error {
	var err error
	switch key {
	case EnvExitAfter:
		b.Exit = true
		b.ExitAfter, err = parseDuration(val)
	case EnvExitCode:
		b.Exit = true
		b.ExitCode, err = parseInt32(val)
	case EnvExitReason:
		b.ExitReason = val
	case EnvStartError:
		b.StartError = val
	case EnvIgnoreSIGTERM:
		b.IgnoreSIGTERM, err = strconv.ParseBool(val)
	case EnvStopDelay:
		b.StopDelay, err = parseDuration(val)
	case EnvTermExitCode:
		var c int32
		c, err = parseInt32(val)
		b.TermExitCode = &c
	case EnvExec:
		err = json.Unmarshal([]byte(val), &b.Exec)
	case EnvExecExitCode:
		b.ExecExitCode, err = parseInt32(val)
	case EnvLog:
		b.Log = val
	case EnvTerminationMessage:
		b.TerminationMessage = val
	case EnvMemoryBytes:
		b.MemoryBytes, err = strconv.ParseUint(val, 10, 64)
	case EnvCPUNanoCores:
		b.CPUNanoCores, err = strconv.ParseUint(val, 10, 64)
	case EnvRootfsBytes:
		b.Disk.RootfsBytes, err = parseBytes(val)
	case EnvRootfsInodes:
		b.Disk.RootfsInodes, err = strconv.ParseUint(val, 10, 64)
	case EnvLogBytes:
		b.Disk.LogBytes, err = parseBytes(val)
	case EnvLogInodes:
		b.Disk.LogInodes, err = strconv.ParseUint(val, 10, 64)
	default:
		return fmt.Errorf("unknown fakecri variable")
	}
	return err
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil && d < 0 {
		return 0, fmt.Errorf("negative duration")
	}
	return d, err
}

// parseBytes reads a byte count, plain ("1048576") or a quantity
// ("1Mi").
func parseBytes(s string) (uint64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, err
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("negative size")
	}
	return uint64(q.Value()), nil
}

func parseInt32(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int32(n), err
}

func (b *Behavior) termExitCode() int32 {
	if b.TermExitCode != nil {
		return *b.TermExitCode
	}
	return exitCodeSIGTERM
}

// exec runs a command against the script: scripted commands first, then
// the built-ins, then the default exit code.
func (b *Behavior) exec(cmd []string, env []*runtimeapi.KeyValue) ExecResult {
	if r, ok := b.Exec[strings.Join(cmd, " ")]; ok {
		return r
	}
	if len(cmd) == 0 {
		return ExecResult{ExitCode: 126, Stderr: "no command given\n"}
	}
	switch cmd[0] {
	case "echo":
		return ExecResult{Stdout: strings.Join(cmd[1:], " ") + "\n"}
	case "true":
		return ExecResult{}
	case "false":
		return ExecResult{ExitCode: 1}
	case "env":
		var sb strings.Builder
		for _, kv := range env {
			sb.WriteString(kv.GetKey() + "=" + string(kv.GetValue()) + "\n")
		}
		return ExecResult{Stdout: sb.String()}
	}
	return ExecResult{ExitCode: b.ExecExitCode}
}
