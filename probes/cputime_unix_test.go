//go:build unix

package probes_test

import (
	"syscall"
	"time"
)

// cpuTime returns the user and system CPU time the whole process has
// used so far (getrusage RUSAGE_SELF).
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
