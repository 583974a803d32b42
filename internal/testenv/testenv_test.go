package testenv_test

import (
	"testing"

	"github.com/nodekit/nodekit/internal/testenv"
)

// recorder is a testing.TB that records which of Skipf and Fatalf ran.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Skipf(string, ...any)  { r.skipped = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestMissingSkipsUnlessRequired(t *testing.T) {
	t.Setenv(string(testenv.Privileged), "")
	r := &recorder{TB: t}
	testenv.Privileged.Missing(r)("no %s", "mount")
	if !r.skipped || r.failed {
		t.Errorf("without %s: skipped %v, failed %v; want a skip", string(testenv.Privileged), r.skipped, r.failed)
	}
	t.Setenv(string(testenv.Privileged), "1")
	r = &recorder{TB: t}
	testenv.Privileged.Missing(r)("no %s", "mount")
	if r.skipped || !r.failed {
		t.Errorf("with %s: skipped %v, failed %v; want a failure", string(testenv.Privileged), r.skipped, r.failed)
	}
}
