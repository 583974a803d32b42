package podsource_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/podsource"
)

// A manifest directory becomes static pods named after the node.
func ExampleFile() {
	dir, _ := os.MkdirTemp("", "manifests-")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(`
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: httpd, image: "busybox:1.36"}]
`), 0o644)

	src, _ := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "edge-1"})
	m, _ := podsource.NewMerger(podsource.MergerConfig{Sources: []podsource.Source{src}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()

	u := <-m.Updates()
	p := u.Pods[0]
	fmt.Println(u.Op, u.Source, p.Namespace+"/"+p.Name, p.Spec.RestartPolicy, p.Annotations[podsource.AnnotationConfigSource])
	cancel()
	<-done
	// Output: ADD file default/web-edge-1 Always file
}
