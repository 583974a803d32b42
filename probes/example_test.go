package probes_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/probes"
)

// An HTTP probe against a server on 127.0.0.1, as a readiness probe of a
// pod on the host network would run.
func ExampleHandlers() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ready" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	port, _ := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])

	h := &probes.Handlers{}
	target := probes.Target{Pod: &v1.Pod{}, Container: &v1.Container{Name: "web"}, PodIP: "127.0.0.1"}
	for _, path := range []string{"/ready", "/missing"} {
		p := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(port))}}}
		result, output, _ := h.Probe(context.Background(), target, p, time.Second)
		fmt.Println(strings.TrimSpace(path + " " + result.String() + " " + strings.TrimSpace(output)))
	}
	// Output:
	// /ready success
	// /missing failure HTTP probe failed with statuscode: 404
}
