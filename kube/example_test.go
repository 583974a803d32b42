package kube_test

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime"
)

// A Node registers itself and reports its status. Here the API server is
// client-go's fake clientset; in a cluster it is
// kubernetes.NewForConfig(restConfig) with the node's credentials.
func ExampleNode() {
	client := fake.NewClientset()
	n, err := kube.NewNode(kube.NodeConfig{
		Client: client,
		Name:   "edge-1",
		Labels: map[string]string{"node.kubernetes.io/role": "edge"},
		Resources: fixedCapacity{
			v1.ResourceCPU:              resource.MustParse("2"),
			v1.ResourceMemory:           resource.MustParse("4Gi"),
			v1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		},
		Reserved: v1.ResourceList{v1.ResourceMemory: resource.MustParse("512Mi")},
		MaxPods:  50,
		Health:   func() error { return nil }, // e.g. agent.Agent's Healthy
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- n.Run(ctx) }()
	<-n.Registered()
	cancel()
	<-done

	node, err := client.CoreV1().Nodes().Get(context.Background(), "edge-1", metav1.GetOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	mem := node.Status.Allocatable[v1.ResourceMemory]
	pods := node.Status.Allocatable[v1.ResourcePods]
	fmt.Println("role:", node.Labels["node.kubernetes.io/role"])
	fmt.Println("allocatable memory:", mem.String(), "pods:", pods.String())
	for _, c := range node.Status.Conditions {
		fmt.Println(c.Type, c.Status, c.Reason)
	}
	// Output:
	// role: edge
	// allocatable memory: 3584Mi pods: 50
	// MemoryPressure False KubeletHasSufficientMemory
	// DiskPressure False KubeletHasNoDiskPressure
	// PIDPressure False KubeletHasSufficientPID
	// Ready True KubeletReady
}

type fixedCapacity v1.ResourceList

func (f fixedCapacity) Capacity() (v1.ResourceList, error) { return v1.ResourceList(f).DeepCopy(), nil }

// A PodSource feeds the pods bound to the node into a podsource.Merger,
// which turns its snapshots into the agent's ADD, UPDATE, DELETE and
// REMOVE. Here the API server is client-go's fake clientset.
func ExamplePodSource() {
	client := fake.NewClientset(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "0b4c2a52-1c57-4a8e-9d6c-5d0d6f7f0a11"},
		Spec:       v1.PodSpec{NodeName: "edge-1", Containers: []v1.Container{{Name: "web", Image: "nginx"}}},
	})
	src, err := kube.NewPodSource(kube.PodSourceConfig{Client: client, NodeName: "edge-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := podsource.NewMerger(podsource.MergerConfig{Sources: []podsource.Source{src}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	for u := range m.Updates() {
		if len(u.Pods) > 0 {
			fmt.Println(u.Op, u.Source, u.Pods[0].Namespace+"/"+u.Pods[0].Name)
			break
		}
	}
	cancel()
	<-done
	// Output:
	// ADD api default/web
}

// Objects gives the configMaps and secrets that pods refer to, to the CRI
// runtime (cri.Config.Objects) and to volumes alike. Before Run, or
// without it, every Get reads from the API server; under Run, each object
// is watched after its first Get.
func ExampleObjects() {
	client := fake.NewClientset(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"},
		Data:       map[string]string{"mode": "edge"},
	})
	objects, err := kube.NewObjects(kube.ObjectsConfig{Client: client})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	cm, err := objects.GetConfigMap(ctx, "default", "settings")
	fmt.Println(cm.Data["mode"], err)
	_, err = objects.GetSecret(ctx, "default", "missing")
	fmt.Println(errors.Is(err, runtime.ErrNotFound))
	// Output:
	// edge <nil>
	// true
}

// Services gives the CRI runtime (cri.Config.Services) the services whose
// addresses become the containers' environment (FOO_SERVICE_HOST...). It
// answers from a cache that Run fills and follows.
func ExampleServices() {
	client := fake.NewClientset(&v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Spec:       v1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []v1.ServicePort{{Name: "https", Port: 443}}},
	})
	services, err := kube.NewServices(kube.ServicesConfig{Client: client})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err = services.ListServices(ctx, "default")
	fmt.Println(errors.Is(err, kube.ErrServicesNotSynced))
	done := make(chan error)
	go func() { done <- services.Run(ctx) }()
	<-services.Synced()
	list, err := services.ListServices(ctx, "default")
	for _, s := range list {
		fmt.Println(s.Name, s.Spec.ClusterIP, err)
	}
	cancel()
	<-done
	// Output:
	// true
	// kubernetes 10.0.0.1 <nil>
}
