package critest_test

import (
	"fmt"

	"github.com/nodekit/nodekit/runtime/critest"
)

// The suite's checks, each a subtest of critest.Run: a runtime can be
// checked one behaviour at a time with go test -run
// 'TestConformance/ExecSync'.
func ExampleChecks() {
	for _, name := range critest.Checks() {
		fmt.Println(name)
	}
	// Output:
	// Version
	// Status
	// Image
	// SandboxLifecycle
	// ContainerExitCodeAndReason
	// ContainerLogs
	// ExecSync
	// StopContainerIsIdempotent
	// StopContainerKillsAfterTimeout
	// RemoveSandboxRemovesContainers
	// ContainerStats
	// ErrorCodes
}
