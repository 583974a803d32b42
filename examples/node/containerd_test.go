package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
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
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	criapi "k8s.io/cri-api/pkg/apis"

	"github.com/nodekit/nodekit/internal/cgroupfs"
	"github.com/nodekit/nodekit/internal/syncbuf"
	"github.com/nodekit/nodekit/kube/kubetest"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// e2eEnv returns the variable hack/e2e/up.sh sets for the end-to-end
// containerd. Unset, the test is skipped; but under hack/e2e/run.sh
// (NODEKIT_E2E_REQUIRED) an unset variable fails it.
func e2eEnv(t testing.TB, key string) string {
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

// containerdNode is examples/node running as node name of a real API
// server on hack/e2e's containerd, with the API server's kubelet client
// certificate trusted by the node's server, as a cluster sets it up: the
// API server reaches the node for logs, exec, attach, port-forward and
// proxy at its InternalIP, 127.0.0.1.
type containerdNode struct {
	name, image string
	dir         string // the test's directory: config, certificates, logs
	logsDir     string // podLogsDir
	cgroupRoot  string // cgroupRoot: the pods' cgroups are below <cgroupRoot>/kubepods
	port        int    // the node server's
	admin       *kubernetes.Clientset
	adminConfig *rest.Config
	cri         criapi.RuntimeService
	// client is the API server's kubelet client certificate and key, which
	// the node's server accepts, for talking to it directly.
	clientCert, clientKey, caFile string
	errOut                        *syncbuf.Buffer
	stop                          func()
}

// startContainerdNode starts the API server and the node, and waits for
// the Node to be Ready. extraConfig is appended to the node's
// KubeletConfiguration. Pods the test creates in namespace "default" are
// removed from containerd when it ends (the node leaves its pods running
// when it stops, as the kubelet does).
func startContainerdNode(t testing.TB, extraConfig string) *containerdNode {
	t.Helper()
	endpoint := e2eEnv(t, "NODEKIT_E2E_ENDPOINT")
	n := &containerdNode{name: "e2e-node", image: e2eEnv(t, "NODEKIT_E2E_IMAGE"), dir: t.TempDir()}
	n.logsDir = filepath.Join(n.dir, "logs")
	n.caFile, n.clientCert, n.clientKey = writeKubeletClientPKI(t, n.dir)
	s := kubetest.Start(t, kubetest.Options{Nodes: []string{n.name}, ExtraArgs: []string{
		"--kubelet-client-certificate=" + n.clientCert, "--kubelet-client-key=" + n.clientKey,
		"--kubelet-preferred-address-types=InternalIP",
	}})
	n.adminConfig = s.AdminConfig()
	n.admin = kubernetes.NewForConfigOrDie(n.adminConfig)
	ctx := context.Background()

	dialCtx, cancelDial := context.WithTimeout(ctx, 30*time.Second)
	cri, err := criclient.Dial(dialCtx, endpoint)
	cancelDial()
	if err != nil {
		t.Fatal(err)
	}
	n.cri = cri
	// The node's pod cgroups are the test's own, and go with it (after
	// its pods, which the cleanup below removes).
	n.cgroupRoot = fmt.Sprintf("/nodekit-e2e-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		cg, err := cgroupfs.New("/sys/fs/cgroup")
		if err != nil {
			return
		}
		// The runtime may still be tearing a container's cgroup down.
		if err := for30s(func() error { return cg.Remove(n.cgroupRoot) }); err != nil {
			t.Errorf("remove the node's cgroups: %v", err)
		}
	})
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
			if sb.GetMetadata().GetNamespace() != "default" {
				continue
			}
			// A container the stopped node was starting may not be
			// removable until its start is over.
			if err := for30s(func() error {
				_ = cri.StopPodSandbox(cctx, sb.GetId())
				return cri.RemovePodSandbox(cctx, sb.GetId())
			}); err != nil {
				t.Errorf("remove sandbox %s: %v", sb.GetId(), err)
			}
		}
	})

	kubeconfig := filepath.Join(n.dir, "kubelet.conf")
	writeKubeconfig(t, s, n.name, kubeconfig)
	config := filepath.Join(n.dir, "config.yaml")
	n.port = freePort(t)
	writeFile(t, config, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
syncFrequency: 10s
nodeStatusUpdateFrequency: 1s
address: 127.0.0.1
port: %d
containerRuntimeEndpoint: %s
podLogsDir: %s
resolvConf: ""
cgroupRoot: %s
authentication:
  x509: {clientCAFile: %s}
`, n.port, endpoint, n.logsDir, n.cgroupRoot, n.caFile)+extraConfig)

	n.errOut, n.stop = startRun(t, ctx, options{config: config, kubeconfig: kubeconfig, rootDir: filepath.Join(n.dir, "root"),
		hostnameOverride: n.name, nodeIP: "127.0.0.1", verbosity: 2})

	eventually(t, 60*time.Second, "the Node Ready", func() (bool, string) {
		node, err := n.admin.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error() + "\n" + n.errOut.String()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, fmt.Sprintf("%+v", c)
			}
		}
		return false, "no Ready condition"
	})
	return n
}

// runPod creates pod in namespace default on the node and waits until it
// is Running and Ready in the API server.
func (n *containerdNode) runPod(t testing.TB, pod *v1.Pod) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	pod.Namespace, pod.Spec.NodeName = "default", n.name
	if _, err := n.admin.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *v1.Pod
	eventually(t, 60*time.Second, "pod "+pod.Name+" Running and Ready in the API server", func() (bool, string) {
		p, err := n.admin.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = p
		ready := slices.ContainsFunc(p.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.PodReady && c.Status == v1.ConditionTrue })
		return p.Status.Phase == v1.PodRunning && ready, fmt.Sprintf("phase %s, ready %v, statuses %+v", p.Status.Phase, ready, p.Status.ContainerStatuses)
	})
	return got
}

// writeKubeletClientPKI writes a CA, and a client certificate it signed
// for the API server's calls to the node (kube-apiserver-kubelet-client in
// group system:masters, as a cluster's setup makes it); it returns the
// CA's file and the certificate's and key's.
func writeKubeletClientPKI(t testing.TB, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject:   pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "kubelet-client.crt"), filepath.Join(dir, "kubelet-client.key")
	writeFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})))
	return caFile, certFile, keyFile
}

// TestRunOnContainerd runs the command as a node of a real API server on
// a real containerd (hack/e2e's): a pod created through the API server
// runs a busybox container in containerd and is Running and Ready in the
// API server, with containerd's container ID and a pod IP from the CNI
// bridge; its graceful deletion stops it and removes the object. Before
// that, the node's server is used through the API server as kubectl,
// Prometheus and metrics-server use it (checkThroughAPIServer): logs,
// exec, port-forward, metrics.
func TestRunOnContainerd(t *testing.T) {
	n := startContainerdNode(t, streamsNodeConfig)
	ctx := context.Background()
	const namespace, podName = "default", "busybox-on-containerd"
	pod := n.runPod(t, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "sleep", Image: n.image,
			ImagePullPolicy: v1.PullNever, Command: []string{"sleep", "3600"}}}},
	})
	if cs := pod.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil || !strings.HasPrefix(cs[0].ContainerID, "containerd://") {
		t.Errorf("container statuses %+v, want one running container with a containerd:// ID", cs)
	} else {
		id := strings.TrimPrefix(cs[0].ContainerID, "containerd://")
		st, err := n.cri.ContainerStatus(ctx, id, false)
		if err != nil {
			t.Errorf("containerd's status of %s: %v", id, err)
		} else if st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("containerd says container %s is %s, want running", id, st.GetStatus().GetState())
		}
	}
	if pod.Status.PodIP == "" || pod.Status.PodIP == "127.0.0.1" {
		t.Errorf("pod IP %q, want one of the CNI bridge's", pod.Status.PodIP)
	}

	t.Run("through the API server", func(t *testing.T) { checkThroughAPIServer(t, n) })

	// busybox's sleep as PID 1 ignores SIGTERM: the grace period ends
	// it, after which the node deletes the object.
	grace := int64(2)
	if err := n.admin.CoreV1().Pods(namespace).Delete(ctx, podName, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the pod object gone", func() (bool, string) {
		_, err := n.admin.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	n.stop()
}

// for30s calls f until it succeeds, every 200 ms for at most 30 s, and
// returns its last error.
func for30s(f func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
