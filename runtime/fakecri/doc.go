// Package fakecri is an in-memory CRI runtime: it implements the
// RuntimeService and ImageManagerService interfaces of
// k8s.io/cri-api/pkg/apis with real state machines and no containers, and
// Server serves the same over gRPC on a unix socket, so any CRI client
// (crictl, a kubelet, nodekit's runtime/cri) can drive it.
//
// It is meant for tests and demos of node agents: the whole pod
// lifecycle runs at memory speed, and containers do what a script says.
//
// # Behaviour
//
// Sandboxes go READY → NOTREADY → removed; containers go CREATED →
// RUNNING → EXITED → removed, with creation, start and finish times from
// the injected clock. Exited containers report the reason containerd
// reports ("Completed", "Error", "OOMKilled", "StartError"). Stopping is
// idempotent; stopping a sandbox kills its containers (137); removing a
// sandbox removes its containers; removing what is gone succeeds. Errors
// carry the gRPC codes containerd 1.6 returns (NotFound for unknown IDs,
// Unknown for duplicate names and wrong states), checked by the
// conformance suite in runtime/critest, which fakecri and containerd both
// pass. IDs are 64 hex digits and can be shortened to a unique prefix.
// A container's status reports, as containerd does, the Linux resources
// it runs with (its config's, or the last UpdateContainerResources') and
// its process's user: the config's runAsUser and runAsGroup (0 when
// unset; no image names a user), with the primary group and then the
// config's supplemental groups as supplemental groups.
//
// Sandboxes not on the host network get an IP from Config.PodCIDR,
// 127.88.0.0/16 by default: loopback addresses, so traffic meant for a
// fake pod never leaves the machine, and a test can bind a server to a
// pod's IP to stand in for the pod. With Config.Network set, each such
// sandbox gets a real network namespace instead (pinned under
// Config.NetNSDir, which needs root), set up through the Network hook
// when the sandbox runs and torn down when it stops, as containerd calls
// CNI; nodekit's network package plugs in there through a small adapter
// (see its tests), so fakecri does not depend on it.
//
// Container logs are written to the CRI log path (the sandbox's log
// directory joined with the container's log path) in the CRI log format.
// ReopenContainerLog creates the file again when it is gone, as a runtime
// does after a log rotation renamed it.
// ExecSync answers from the container's script; GetContainerEvents
// streams created/started/stopped/deleted events for sandboxes and
// containers, with the pod's statuses, as containerd 2 does; stats report
// scripted CPU and memory figures; Status reports RuntimeReady and
// NetworkReady, which SetCondition changes.
//
// # Scripting
//
// A container's behaviour comes from FAKECRI_* variables in its config's
// Envs, so a pod manifest alone scripts it, and every CRI client drives
// it the same way (a real runtime ignores the variables):
//
//	FAKECRI_EXIT_AFTER=2s FAKECRI_EXIT_CODE=1   crash two seconds after start
//	FAKECRI_EXIT_CODE=0                         exit at once, successfully
//	FAKECRI_EXIT_REASON=OOMKilled               report this reason on exit
//	FAKECRI_START_ERROR=msg                     fail StartContainer
//	FAKECRI_IGNORE_SIGTERM=true                 only die when killed
//	FAKECRI_STOP_DELAY=3s                       take this long after SIGTERM
//	FAKECRI_TERM_EXIT_CODE=0                    exit code after SIGTERM
//	FAKECRI_EXEC={"cat /tmp/ok":{"exitCode":1}} exec results per command
//	FAKECRI_EXEC_EXIT_CODE=0                    exit code of other commands
//	FAKECRI_LOG=text                            written to the log on start
//	FAKECRI_TERMINATION_MESSAGE=text            written to the message file
//	FAKECRI_MEMORY_BYTES=1048576                memory figure in stats
//	FAKECRI_CPU_NANOCORES=250000000             CPU figure in stats
//	FAKECRI_ROOTFS_BYTES=50Mi                   writable layer on disk (and
//	FAKECRI_ROOTFS_INODES=100                   its inodes) until removed
//	FAKECRI_LOG_BYTES=20Mi, FAKECRI_LOG_INODES=1  logs on the node's disk
//
// A variable that does not parse makes CreateContainer fail with
// InvalidArgument naming it. The Go API does the same and more: Script
// (by pod and container name), Exit, SetExecResult, SetUsage,
// SetDiskUsage, SetDisks (see Disks), SetPull
// (pull latency or failure per image), SetCondition, InjectError (the next
// call of a method fails) and Calls (the methods called so far). Pulls
// can also be scripted per pod with the AnnotationPullDelay and
// AnnotationPullError pod annotations.
//
// # Disks
//
// SetDisks scripts the node's filesystems: the node's (nodefs), and
// optionally an image filesystem, with the writable layers on it or,
// split, on the node's. Each filesystem has a capacity, inodes, and
// what other files take; the runtime adds what it holds there: 4Mi and
// an inode per image, each container's writable layer (an exited
// container's too, until it is removed) and logs. ImageFsInfo reports
// the images and layers (two filesystems when split), container stats
// the writable layers, and DiskStats wraps a summary provider
// (server.CRIStats over the runtime) to fill in node.fs,
// node.runtime.imageFs and containerFs, each container's logs and each
// pod's ephemeral storage. A harness drives disk pressure by calling
// SetDisks again with less room; removing dead containers and unused
// images gives room back, as on a real node.
//
// # What it leaves out
//
// No processes, filesystems, namespaces or networks exist: commands are
// not interpreted (ExecSync knows only its script and the built-ins echo,
// true, false and env). The streaming calls Exec, Attach and PortForward
// return Unimplemented unless a streaming server runs
// (NewStreamingServer, then its Run, serving k8s.io/cri-streaming's SPDY
// sessions on a listener): exec of "cat" echoes stdin, other commands
// answer their ExecSync script, attach echoes stdin, and every forwarded
// port is an echo. Checkpoint and restore return Unimplemented.
//
// # Usage
//
//	rt, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
//	// in process, with runtime/cri:
//	pods, err := cri.New(cri.Config{RuntimeService: rt, ImageService: rt})
//	// or over gRPC:
//	lis, err := fakecri.ListenUnix("unix:///tmp/fakecri.sock")
//	err = fakecri.NewServer(rt, rt).Serve(ctx, lis)
//
// The fake clock (k8s.io/utils/clock/testing) drives every timer: exits,
// stop timeouts, exec and pull delays.
package fakecri
