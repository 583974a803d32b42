package e2e_test

import (
	"testing"

	"github.com/nodekit/nodekit/runtime/critest"
)

// TestContainerdConformance runs the suite fakecri passes against the
// real containerd, on the pod network (CNI bridge) so sandboxes get IPs.
func TestContainerdConformance(t *testing.T) {
	c, image := dialContainerd(t)
	if c.RuntimeName() != "containerd" {
		t.Fatalf("runtime name %q, want containerd", c.RuntimeName())
	}
	critest.Run(t, critest.Config{Runtime: c, Images: c, Image: image})
}
