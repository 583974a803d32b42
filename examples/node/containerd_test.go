package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kube/kubetest"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// e2eEnv returns the variable hack/e2e/up.sh sets for the end-to-end
// containerd. Unset, the test is skipped; but under hack/e2e/run.sh
// (NODEKIT_E2E_REQUIRED) an unset variable fails it.
func e2eEnv(t *testing.T, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		if os.Getenv("NODEKIT_E2E_REQUIRED") != "" {
			t.Fatalf("%s is not set, but the end-to-end environment is required (NODEKIT_E2E_REQUIRED)", key)
		}
		t.Skipf("%s is not set: this test runs under make e2e with the kube tools (make test)", key)
	}
	return v
}

// TestRunOnContainerd runs the command as a node of a real API server on
// a real containerd (hack/e2e's): a pod created through the API server
// runs a busybox container in containerd and is Running and Ready in the
// API server, with containerd's container ID and a pod IP from the CNI
// bridge; its graceful deletion stops it and removes the object.
func TestRunOnContainerd(t *testing.T) {
	endpoint := e2eEnv(t, "NODEKIT_E2E_ENDPOINT")
	image := e2eEnv(t, "NODEKIT_E2E_IMAGE")
	const name = "e2e-node"
	s := kubetest.Start(t, kubetest.Options{Nodes: []string{name}})
	admin := kubernetes.NewForConfigOrDie(s.AdminConfig())
	ctx := context.Background()
	dir := t.TempDir()

	dialCtx, cancelDial := context.WithTimeout(ctx, 30*time.Second)
	cri, err := criclient.Dial(dialCtx, endpoint)
	cancelDial()
	if err != nil {
		t.Fatal(err)
	}
	const namespace, podName = "default", "busybox-on-containerd"
	// The node leaves its pods running when it stops, as the kubelet
	// does: remove this test's sandbox from the shared containerd.
	t.Cleanup(func() {
		defer cri.Close(context.Background())
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := cri.ListPodSandbox(cctx, nil)
		if err != nil {
			t.Error(err)
			return
		}
		for _, sb := range list {
			if md := sb.GetMetadata(); md.GetName() == podName && md.GetNamespace() == namespace {
				_ = cri.StopPodSandbox(cctx, sb.GetId())
				if err := cri.RemovePodSandbox(cctx, sb.GetId()); err != nil {
					t.Errorf("remove sandbox %s: %v", sb.GetId(), err)
				}
			}
		}
	})

	kubeconfig := filepath.Join(dir, "kubelet.conf")
	writeKubeconfig(t, s, name, kubeconfig)
	config := filepath.Join(dir, "config.yaml")
	writeFile(t, config, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
syncFrequency: 10s
nodeStatusUpdateFrequency: 1s
address: 127.0.0.1
port: %d
containerRuntimeEndpoint: %s
podLogsDir: %s
resolvConf: ""
`, freePort(t), endpoint, filepath.Join(dir, "logs")))

	errOut, stop := startRun(t, ctx, options{config: config, kubeconfig: kubeconfig, rootDir: filepath.Join(dir, "root"),
		hostnameOverride: name, nodeIP: "127.0.0.1", verbosity: 2})

	eventually(t, 60*time.Second, "the Node Ready", func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error() + "\n" + errOut.String()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, fmt.Sprintf("%+v", c)
			}
		}
		return false, "no Ready condition"
	})
	if _, err := admin.CoreV1().Pods(namespace).Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: namespace},
		Spec: v1.PodSpec{NodeName: name, Containers: []v1.Container{{Name: "sleep", Image: image,
			ImagePullPolicy: v1.PullNever, Command: []string{"sleep", "3600"}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *v1.Pod
	eventually(t, 60*time.Second, "the pod Running and Ready in the API server", func() (bool, string) {
		p, err := admin.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		ready := slices.ContainsFunc(p.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.PodReady && c.Status == v1.ConditionTrue })
		return p.Status.Phase == v1.PodRunning && ready, fmt.Sprintf("phase %s, ready %v, statuses %+v", p.Status.Phase, ready, p.Status.ContainerStatuses)
	})
	if cs := pod.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil || !strings.HasPrefix(cs[0].ContainerID, "containerd://") {
		t.Errorf("container statuses %+v, want one running container with a containerd:// ID", cs)
	} else {
		id := strings.TrimPrefix(cs[0].ContainerID, "containerd://")
		st, err := cri.ContainerStatus(ctx, id, false)
		if err != nil {
			t.Errorf("containerd's status of %s: %v", id, err)
		} else if st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("containerd says container %s is %s, want running", id, st.GetStatus().GetState())
		}
	}
	if pod.Status.PodIP == "" || pod.Status.PodIP == "127.0.0.1" {
		t.Errorf("pod IP %q, want one of the CNI bridge's", pod.Status.PodIP)
	}

	// busybox's sleep as PID 1 ignores SIGTERM: the grace period ends
	// it, after which the node deletes the object.
	grace := int64(2)
	if err := admin.CoreV1().Pods(namespace).Delete(ctx, podName, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the pod object gone", func() (bool, string) {
		_, err := admin.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	stop()
}
