package e2e_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nodekit/nodekit/runtime/criclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env returns the variable. When it is unset the test is skipped, so that
// "go test ./..." passes on a machine without the end-to-end environment;
// but hack/e2e/run.sh sets NODEKIT_E2E_REQUIRED=1, and there a missing
// variable fails the test: a broken set-up never passes as skipped tests.
func env(t *testing.T, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		if os.Getenv("NODEKIT_E2E_REQUIRED") != "" {
			t.Fatalf("%s is not set, but the end-to-end environment is required (NODEKIT_E2E_REQUIRED)", key)
		}
		t.Skipf("%s is not set: run the end-to-end tests with make e2e", key)
	}
	return v
}

// dialContainerd connects to the containerd that hack/e2e/up.sh started.
func dialContainerd(t *testing.T) (*criclient.Client, string) {
	t.Helper()
	endpoint := env(t, "NODEKIT_E2E_ENDPOINT")
	image := env(t, "NODEKIT_E2E_IMAGE")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := criclient.Dial(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, image
}
