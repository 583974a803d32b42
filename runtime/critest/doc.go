// Package critest is a conformance suite for CRI runtimes: behavioural
// checks that any implementation of the k8s.io/cri-api/pkg/apis
// RuntimeService and ImageManagerService interfaces must pass to stand in
// for a real runtime under nodekit.
//
// nodekit runs the same suite against runtime/fakecri in process, against
// fakecri served over gRPC and reached through runtime/criclient.Dial, and
// against a real containerd + runc in the end-to-end run. fakecri is only
// trustworthy as a stand-in because it passes what containerd passes.
//
// Each container the suite makes carries both a real command (busybox
// sh) and the FAKECRI_* variables that script the same behaviour in
// fakecri, so one config drives every runtime.
//
// # Usage
//
//	func TestConformance(t *testing.T) {
//		rt, _ := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
//		critest.Run(t, critest.Config{Runtime: rt, Images: rt, Image: "busybox:1.36"})
//	}
//
// What it checks: the Version and Status answers; the sandbox lifecycle
// (ready with an IP, listed by label, stop and remove idempotent); a
// container that exits reports its code, reason and timestamps; logs land
// in the CRI log path in the CRI log format; ExecSync returns output and
// exit codes; StopContainer is idempotent and honours the timeout;
// removing a sandbox removes its containers; stats list running
// containers; images report their status; and the gRPC codes a runtime
// returns for unknown IDs, missing metadata, duplicate names and calls on
// containers in the wrong state. The expected codes are the ones
// containerd 1.6 returns, measured against it: Unknown for most state and
// naming errors, NotFound for unknown IDs, absent images and stopped
// sandboxes, success for removing what is already gone.
package critest
