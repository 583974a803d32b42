//go:build !unix

package probes_test

import "time"

// cpuTime is not measured here: benchmarks report no CPU figures.
func cpuTime() (time.Duration, bool) { return 0, false }
