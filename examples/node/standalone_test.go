package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/syncbuf"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// Without --kubeconfig the node runs the static pods of its
// staticPodPath, as the kubelet does, and serves their statuses on /pods;
// without a staticPodPath it has nothing to run and says so.
func TestRunWithoutKubeconfigRunsStaticPods(t *testing.T) {
	dir := t.TempDir()
	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.91.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := serveFakeCRI(t, dir, fake, nil)

	manifests := filepath.Join(dir, "manifests")
	writeFile(t, filepath.Join(manifests, "web.yaml"), `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: c, image: busybox}]
`)
	port, readOnlyPort := freePort(t), freePort(t)
	config := filepath.Join(dir, "config.yaml")
	writeFile(t, config, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupsPerQOS: false
staticPodPath: %s
fileCheckFrequency: 1s
address: 127.0.0.1
port: %d
readOnlyPort: %d
containerRuntimeEndpoint: %s
podLogsDir: %s
resolvConf: ""
`, manifests, port, readOnlyPort, endpoint, filepath.Join(dir, "logs")))

	var errOut syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{config: config, rootDir: filepath.Join(dir, "root"), hostnameOverride: "edge-2"}, &errOut)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run = %v\n%s", err, errOut.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("run did not return within 30s of its context ending\n%s", errOut.String())
		}
	}()
	eventually(t, 30*time.Second, "the static pod Running on /pods", func() (bool, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/pods", port))
		if err != nil {
			return false, err.Error() + "\n" + errOut.String()
		}
		defer resp.Body.Close()
		var list v1.PodList
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			return false, err.Error()
		}
		for _, p := range list.Items {
			if p.Name == "web-edge-2" && p.Status.Phase == v1.PodRunning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods", len(list.Items))
	})

	// readOnlyPort: the read-only server answers /pods over plain HTTP
	// without credentials, and refuses exec there although the node
	// server (plain HTTP here, for static pods only) serves it.
	readOnly := fmt.Sprintf("http://127.0.0.1:%d", readOnlyPort)
	for path, want := range map[string]int{"/pods": 200, "/healthz": 200, "/metrics": 200, "/metrics/cadvisor": 200, "/exec/default/web-edge-2/c?command=true": http.StatusMethodNotAllowed} {
		resp, err := http.Get(readOnly + path)
		if err != nil {
			t.Fatalf("read-only %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("read-only %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/exec/default/web-edge-2/c?command=true", port)); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode == http.StatusMethodNotAllowed {
		t.Errorf("node server /exec: 405, want it served there")
	}

	// Neither an API server nor static pods: nothing to run.
	noPods := filepath.Join(dir, "nopods.yaml")
	writeFile(t, noPods, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupsPerQOS: false\n")
	err = run(context.Background(), options{config: noPods, rootDir: filepath.Join(dir, "root2"), hostnameOverride: "edge-3"}, &syncbuf.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "staticPodPath") {
		t.Errorf("run without kubeconfig nor staticPodPath = %v, want an error naming staticPodPath", err)
	}
}
