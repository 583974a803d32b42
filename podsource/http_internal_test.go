package podsource

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// TestHTTPListCostIsLinear: a PodList costs the same bytes per pod, few
// pods or many; a long list does not cost each pod more.
func TestHTTPListCostIsLinear(t *testing.T) {
	h, err := NewHTTP(HTTPConfig{URL: "http://manifests.example/pods", NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	perPod := func(n int) uint64 {
		var b bytes.Buffer
		b.WriteString(`{"kind":"PodList","apiVersion":"v1","items":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"metadata":{"name":"p%d"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, i)
		}
		b.WriteString("]}")
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		pods, _, err := h.parse(b.Bytes())
		runtime.ReadMemStats(&after)
		if err != nil || len(pods) != n {
			t.Fatalf("%d pods, err %v; want %d", len(pods), err, n)
		}
		return (after.TotalAlloc - before.TotalAlloc) / uint64(n)
	}
	few, many := perPod(500), perPod(3000)
	if 5*many > 7*few {
		t.Errorf("a list of 3000 pods costs %d bytes per pod, one of 500 pods %d", many, few)
	}
}
