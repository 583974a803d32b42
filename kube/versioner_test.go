package kube_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	criapi "k8s.io/cri-api/pkg/apis"

	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// The runtimes nodekit ships give NodeConfig.Runtime without an adapter.
var (
	_ criapi.RuntimeVersioner = (*criclient.Client)(nil)
	_ criapi.RuntimeVersioner = (*fakecri.Runtime)(nil)
)

// TestRuntimeVersionFromFakeCRI checks containerRuntimeVersion end to end
// with fakecri's Version answer.
func TestRuntimeVersionFromFakeCRI(t *testing.T) {
	rt, err := fakecri.New(fakecri.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := rt.Version(context.Background(), "v1")
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	n, err := kube.NewNode(kube.NodeConfig{Client: client, Name: "n1", Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	<-n.Registered()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	node, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, w := node.Status.NodeInfo.ContainerRuntimeVersion, want.GetRuntimeName()+"://"+want.GetRuntimeVersion(); got != w {
		t.Fatalf("containerRuntimeVersion = %q, want %q", got, w)
	}
}
