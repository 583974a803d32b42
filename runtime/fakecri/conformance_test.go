package fakecri_test

import (
	"testing"

	"github.com/nodekit/nodekit/runtime/critest"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func TestConformance(t *testing.T) {
	rt, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
	if err != nil {
		t.Fatal(err)
	}
	critest.Run(t, critest.Config{Runtime: rt, Images: rt, Image: "busybox:1.36"})
}
