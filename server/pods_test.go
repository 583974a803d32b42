package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/server"
)

// podsBody returns what /pods answers for the node.
func podsBody(t testing.TB, node server.PodLister) []byte {
	t.Helper()
	srv, err := server.New(server.Config{Pods: node})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/pods", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("/pods: %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	return rec.Body.Bytes()
}

// TestPodsIsThePodListOfPods: the list written item by item is the
// v1.PodList of the node's pods, as json.Marshal would write it, for no
// pod, one, and many.
func TestPodsIsThePodListOfPods(t *testing.T) {
	for _, n := range []int{0, 1, 3, 250} {
		node := newFakeNode()
		for i := 0; i < n; i++ {
			p := node.addPod("ns", fmt.Sprintf("pod-%d", i), types.UID(fmt.Sprint("uid-", i)))
			p.Labels = map[string]string{"app": "x"}
			p.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1"}
		}
		body := podsBody(t, node)
		want := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		for _, p := range node.Pods() {
			want.Items = append(want.Items, *p)
		}
		wantJSON, err := json.Marshal(&want)
		if err != nil {
			t.Fatal(err)
		}
		var got, wantAny any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%d pods: /pods is not JSON: %v\n%s", n, err, body)
		}
		if err := json.Unmarshal(wantJSON, &wantAny); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantAny, got); diff != "" {
			t.Errorf("%d pods: /pods (-json.Marshal +got):\n%s", n, diff)
		}
	}
}

// BenchmarkPods1000 measures /pods of 1000 pods: the list is written one
// item at a time, so its memory is one pod's encoding.
func BenchmarkPods1000(b *testing.B) {
	node := newFakeNode()
	for i := 0; i < 1000; i++ {
		node.addPod("ns", fmt.Sprintf("pod-%04d", i), types.UID(fmt.Sprint("uid-", i)))
	}
	srv, err := server.New(server.Config{Pods: node})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	b.ReportAllocs()
	b.ResetTimer()
	req := httptest.NewRequest(http.MethodGet, "/pods", nil)
	for i := 0; i < b.N; i++ {
		w := &discard{header: http.Header{}}
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK || w.n < 1000*100 {
			b.Fatalf("/pods: %d, %d bytes", w.code, w.n)
		}
	}
}

// discard is a ResponseWriter that counts the body and keeps none of it.
type discard struct {
	header http.Header
	code   int
	n      int
}

func (d *discard) Header() http.Header { return d.header }
func (d *discard) Write(p []byte) (int, error) {
	if d.code == 0 {
		d.code = http.StatusOK
	}
	d.n += len(p)
	return len(p), nil
}
func (d *discard) WriteHeader(code int) { d.code = code }
