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
	t.Setenv(testenv.PrivilegedRequired, "")
	r := &recorder{TB: t}
	testenv.Missing(r)("no %s", "mount")
	if !r.skipped || r.failed {
		t.Errorf("without %s: skipped %v, failed %v; want a skip", testenv.PrivilegedRequired, r.skipped, r.failed)
	}
	t.Setenv(testenv.PrivilegedRequired, "1")
	r = &recorder{TB: t}
	testenv.Missing(r)("no %s", "mount")
	if r.skipped || !r.failed {
		t.Errorf("with %s: skipped %v, failed %v; want a failure", testenv.PrivilegedRequired, r.skipped, r.failed)
	}
}
