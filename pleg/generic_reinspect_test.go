package pleg_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/nodekit/nodekit/pleg"
)

// The relisting generator keeps the kubelet's podsToReinspect: a pod
// whose inspection failed is inspected again at every relist, changed or
// not, with the error in the cache meanwhile, until an inspection
// succeeds or the pod is gone.
func TestRelistReinspectsUntilSuccessOrGone(t *testing.T) {
	ctx := context.Background()
	for _, end := range []string{"success", "gone"} {
		t.Run(end, func(t *testing.T) {
			rt := newScripted("a", "b")
			cache := pleg.NewCache()
			gen, err := pleg.NewGeneric(pleg.Config{Runtime: rt, Cache: cache, EventBuffer: 100})
			if err != nil {
				t.Fatal(err)
			}
			rt.set(func() { rt.failing["a"] = true })
			for i := 0; i < 3; i++ {
				gen.Relist(ctx)
				var calls []string
				for len(rt.called) > 0 {
					calls = append(calls, string(<-rt.called))
				}
				want := "[a]"
				if i == 0 {
					want = "[a b]" // both are new
				}
				if got := fmt.Sprint(sortedStrings(calls)); got != want {
					t.Fatalf("relist %d inspected %s, want %s", i, got, want)
				}
				if _, err := cache.Get("a"); err == nil {
					t.Fatalf("relist %d: the cache holds no error for a", i)
				}
			}
			rt.set(func() {
				delete(rt.failing, "a")
				if end == "gone" {
					delete(rt.pods, "a")
				}
			})
			gen.Relist(ctx)
			st, err := cache.Get("a")
			if err != nil {
				t.Fatalf("the cache kept the error: %v", err)
			}
			if has := st.FindContainerStatus("c") != nil; has != (end == "success") {
				t.Fatalf("the cache holds %+v", st)
			}
			for len(rt.called) > 0 {
				<-rt.called
			}
			gen.Relist(ctx)
			rt.noCall(t, "by a relist after the "+end)
		})
	}
}

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}
