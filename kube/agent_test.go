package kube_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/kube/internal/apiservertest"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// TestAgentAgainstAPIServer runs the whole node (agent on fakecri, Node,
// PodSource, StatusSink, PodDeleter) with the node's own credentials
// against a real API server: a pod an administrator creates on the node
// runs, its status reaches Running and Ready in the API server, and a
// graceful deletion stops its containers and removes the pod object.
func TestAgentAgainstAPIServer(t *testing.T) {
	const name = "node-i"
	s := apiservertest.Start(t, apiservertest.Options{Nodes: []string{name}})
	admin := kubernetes.NewForConfigOrDie(s.AdminConfig())
	client := kubernetes.NewForConfigOrDie(s.NodeConfig(t, name))
	ctx := context.Background()

	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.89.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	src, err := kube.NewPodSource(kube.PodSourceConfig{Client: client, NodeName: name})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := kube.NewStatusSink(kube.StatusSinkConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	deleter, err := kube.NewPodDeleter(kube.PodDeleterConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	services, err := kube.NewServices(kube.ServicesConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, err := agent.New(agent.Config{
		NodeName: name, RuntimeService: fake, ImageService: fake,
		Sources: []podsource.Source{src}, StatusSink: sink, PodTerminated: deleter.PodTerminated,
		RelistPeriod: 100 * time.Millisecond, HousekeepingPeriod: 200 * time.Millisecond, BackOffPeriod: 200 * time.Millisecond,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-", Services: services},
	})
	if err != nil {
		t.Fatal(err)
	}
	node, err := kube.NewNode(kube.NodeConfig{
		Client: client, Name: name, Runtime: fake, Health: a.Healthy,
		NodeStatusUpdateFrequency: 500 * time.Millisecond, LeaseDuration: 4 * time.Second, LeaseRenewInterval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 3)
	go func() { done <- a.Run(runCtx) }()
	go func() { done <- node.Run(runCtx) }()
	go func() { done <- services.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		for range 3 {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run = %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		}
	})

	eventually(t, 30*time.Second, "the Node Ready", func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := conditionOf(n, v1.NodeReady)
		return c != nil && c.Status == v1.ConditionTrue, fmt.Sprintf("%+v", c)
	})

	// A service the administrator creates becomes the containers'
	// environment, read with the node's credentials.
	if _, err := admin.CoreV1().Services("default").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "foo"},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 8080}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server creates service kubernetes on its own, some time
	// after it first answers; the pod is created once the node sees both.
	eventually(t, 30*time.Second, "the node sees services foo and kubernetes", func() (bool, string) {
		list, err := services.ListServices(ctx, "default")
		if err != nil {
			return false, err.Error()
		}
		seen := map[string]bool{}
		for _, s := range list {
			seen[s.Name] = true
		}
		return seen["foo"] && seen["kubernetes"], fmt.Sprintf("services %v", seen)
	})

	pod := apiPod("default", "web", "", name, 0)
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "side", Image: "busybox"})
	created, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the pod Running and Ready in the API server", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == v1.PodReady && c.Status == v1.ConditionTrue)
		}
		return p.Status.Phase == v1.PodRunning && ready && p.Status.PodIP != "" && len(p.Status.ContainerStatuses) == 2,
			fmt.Sprintf("phase %s, ready %v, podIP %q, %d container statuses", p.Status.Phase, ready, p.Status.PodIP, len(p.Status.ContainerStatuses))
	})
	// Another writer turns the pod's Ready False in the API server; the
	// node writes its status again, as the kubelet's status manager
	// reconciles a status that differs from its own.
	tampered, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range tampered.Status.Conditions {
		if c := &tampered.Status.Conditions[i]; c.Type == v1.PodReady {
			c.Status, c.Reason = v1.ConditionFalse, "Tampered"
		}
	}
	if _, err := admin.CoreV1().Pods("default").UpdateStatus(ctx, tampered, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the node's Ready back in the API server", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady {
				return c.Status == v1.ConditionTrue, fmt.Sprintf("%+v", c)
			}
		}
		return false, "no Ready condition"
	})
	// Restored once: the node's own writes, coming back through its
	// watch, make no more.
	patched := sink.Patched()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if sink.Patched() > patched+1 {
			t.Fatalf("%d patches within 3 s of restoring Ready, want at most 1: the node fights its own writes", sink.Patched()-patched)
		}
	}
	running := func() int {
		cs, err := fake.ListContainers(ctx, &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{cri.LabelPodUID: string(created.UID)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	if n := running(); n != 2 {
		t.Fatalf("%d containers of the pod run on the runtime, want 2", n)
	}
	cs, err := fake.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(created.UID)}})
	if err != nil || len(cs) == 0 {
		t.Fatalf("containers of the pod: %v, %v", cs, err)
	}
	out, _, err := fake.ExecSync(ctx, cs[0].Id, []string{"env"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FOO_SERVICE_HOST=10.0.0.", "FOO_SERVICE_PORT_HTTP=8080", "FOO_PORT_8080_TCP_PORT=8080", "KUBERNETES_SERVICE_HOST=10.0.0.1\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("container env lacks %q:\n%s", want, out)
		}
	}

	grace := int64(30)
	if err := admin.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 25*time.Second, "the pod object gone, well within its 30s grace period", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("deletionTimestamp %v, phase %s", p.DeletionTimestamp, p.Status.Phase)
	})
	if n := running(); n != 0 {
		t.Errorf("%d containers of the deleted pod still run", n)
	}
	if deleter.Deleted() != 1 {
		t.Errorf("PodDeleter deleted %d pods, want 1", deleter.Deleted())
	}

	// A pod that finished on its own (a Job's) reaches Succeeded in the API
	// server and is not deleted by the node; deleted later, it goes at
	// once, as the API server deletes a pod in a terminal phase without
	// waiting for the node.
	job := apiPod("default", "job", "", name, 0)
	job.Spec.RestartPolicy = v1.RestartPolicyNever
	job.Spec.Containers[0].Env = []v1.EnvVar{{Name: fakecri.EnvExitAfter, Value: "100ms"}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the job pod Succeeded in the API server", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "job", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodSucceeded, string(p.Status.Phase)
	})
	if _, err := admin.CoreV1().Pods("default").Get(ctx, "job", metav1.GetOptions{}); err != nil || deleter.Deleted() != 1 {
		t.Fatalf("the finished pod, not deleted by anyone: get %v, PodDeleter deleted %d; want it kept, 1", err, deleter.Deleted())
	}
	if err := admin.CoreV1().Pods("default").Delete(ctx, "job", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the finished pod's object gone once deleted", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "job", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("deletionTimestamp %v, phase %s", p.DeletionTimestamp, p.Status.Phase)
	})
}
