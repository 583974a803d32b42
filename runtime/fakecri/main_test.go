package fakecri_test

import (
	"testing"

	"go.uber.org/goleak"
)

// net/http answers a request it refuses (431, headers too large) and then
// holds the connection 500 ms before closing it, to avoid a reset
// (closeWriteAndWait); that wait outlives a test that needs nothing more of it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("net/http.(*conn).closeWriteAndWait"))
}
