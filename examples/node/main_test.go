package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/syncbuf"
	"github.com/nodekit/nodekit/kube/kubetest"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// eventually polls cond every 100ms for at most d, failing with the last
// state it described.
func eventually(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last state: %s", what, d, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	t.Run("defaults", func(t *testing.T) {
		s, err := loadConfig("")
		if err != nil {
			t.Fatal(err)
		}
		want := settings{fileCheck: 20 * time.Second, sync: time.Minute, statusUpdate: 10 * time.Second, report: 5 * time.Minute,
			leaseDuration: 40 * time.Second, listen: "127.0.0.1:10250", port: 10250, podLogsDir: "/var/log/pods", cgroupRoot: "/kubepods", maxPods: 110, resolvConf: "/etc/resolv.conf",
			logMaxSize: 10 * 1024 * 1024, logMaxFiles: 5, logMaxWorkers: 1, logMonitorInterval: 10 * time.Second}
		if s.eviction == nil || len(s.eviction.Thresholds) != 6 || s.eviction.Thresholds[5].String() != "allocatableMemory.available<100Mi" {
			t.Errorf("eviction = %+v, want the kubelet's 5 default hard thresholds and allocatableMemory.available<100Mi", s.eviction)
		}
		if g := s.imageGC; g == nil || g.HighThresholdPercent != 0 || g.LowThresholdPercent != 0 || g.MinAge != 0 {
			t.Errorf("imageGC = %+v, want the kubelet's defaults (zero fields)", s.imageGC)
		}
		s.eviction, s.imageGC = nil, nil
		if fmt.Sprintf("%+v", s) != fmt.Sprintf("%+v", want) {
			t.Errorf("loadConfig(\"\") = %+v\nwant %+v", s, want)
		}
	})
	t.Run("cgroups", func(t *testing.T) {
		for body, want := range map[string]string{
			"":                    "/kubepods",
			"cgroupRoot: /edge\n": "/edge/kubepods",
			"cgroupRoot: /edge/\ncgroupDriver: cgroupfs\n":  "/edge/kubepods",
			"cgroupsPerQOS: false\n":                        "",
			"cgroupsPerQOS: false\ncgroupDriver: systemd\n": "",
		} {
			path := filepath.Join(dir, "cgroups.yaml")
			writeFile(t, path, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+body)
			s, err := loadConfig(path)
			if err != nil || s.cgroupRoot != want {
				t.Errorf("%q: cgroupRoot %q, %v; want %q", body, s.cgroupRoot, err, want)
			}
		}
		for _, body := range []string{"cgroupDriver: systemd\n", "cgroupRoot: edge\n", "cgroupRoot: /a/../b\n"} {
			path := filepath.Join(dir, "cgroups.yaml")
			writeFile(t, path, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+body)
			if _, err := loadConfig(path); err == nil {
				t.Errorf("%q accepted", body)
			}
		}
	})
	t.Run("fields honoured", func(t *testing.T) {
		path := filepath.Join(dir, "full.yaml")
		writeFile(t, path, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupsPerQOS: false
staticPodPath: /etc/kubernetes/manifests
syncFrequency: 30s
nodeStatusUpdateFrequency: 4s
nodeLeaseDurationSeconds: 20
address: 0.0.0.0
port: 10260
readOnlyPort: 10265
containerRuntimeEndpoint: unix:///run/crio/crio.sock
podLogsDir: /srv/logs
registerWithTaints: [{key: example.com/edge, effect: NoSchedule}]
maxPods: 30
systemReserved: {cpu: 100m, memory: 100Mi}
kubeReserved: {cpu: 200m}
resolvConf: ""
authentication: {anonymous: {enabled: false}}
evictionHard: {memory.available: 200Mi}
evictionSoft: {nodefs.available: 20%}
evictionSoftGracePeriod: {nodefs.available: 1m}
evictionPressureTransitionPeriod: 30s
evictionMaxPodGracePeriod: 15
imageGCHighThresholdPercent: 90
imageGCLowThresholdPercent: 70
imageMinimumGCAge: 5m
containerLogMaxSize: 1Mi
containerLogMaxFiles: 3
containerLogMaxWorkers: 4
containerLogMonitorInterval: 5s
`)
		s, err := loadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if s.staticPodPath != "/etc/kubernetes/manifests" || s.sync != 30*time.Second || s.statusUpdate != 4*time.Second ||
			s.report != 4*time.Second || s.leaseDuration != 20*time.Second || s.listen != "0.0.0.0:10260" || s.port != 10260 || s.readOnlyPort != 10265 ||
			s.endpoint != "unix:///run/crio/crio.sock" || s.podLogsDir != "/srv/logs" || s.maxPods != 30 || s.resolvConf != "-" ||
			len(s.taints) != 1 || s.taints[0].Key != "example.com/edge" {
			t.Errorf("loadConfig = %+v", s)
		}
		if s.logMaxSize != 1<<20 || s.logMaxFiles != 3 || s.logMaxWorkers != 4 || s.logMonitorInterval != 5*time.Second {
			t.Errorf("container logs: max size %d, max files %d, workers %d, interval %v; want 1Mi, 3, 4, 5s",
				s.logMaxSize, s.logMaxFiles, s.logMaxWorkers, s.logMonitorInterval)
		}
		if g := s.imageGC; g.HighThresholdPercent != 90 || g.LowThresholdPercent != 70 || g.MinAge != 5*time.Minute {
			t.Errorf("imageGC = %+v", g)
		}
		var ts []string
		for _, th := range s.eviction.Thresholds {
			ts = append(ts, th.String()+"/"+th.GracePeriod.String())
		}
		if strings.Join(ts, " ") != "memory.available<200Mi/0s nodefs.available<20%/1m0s allocatableMemory.available<200Mi/0s" ||
			s.eviction.PressureTransitionPeriod != 30*time.Second || s.eviction.MaxPodGracePeriodSeconds != 15 {
			t.Errorf("eviction = %v %+v", ts, s.eviction)
		}
		if cpu, mem := s.reserved[v1.ResourceCPU], s.reserved[v1.ResourceMemory]; cpu.Cmp(resource.MustParse("300m")) != 0 || mem.Cmp(resource.MustParse("100Mi")) != 0 {
			t.Errorf("reserved = %v, want cpu 300m (system + kube) and memory 100Mi", s.reserved)
		}
	})
	t.Run("enforceNodeAllocatable without pods", func(t *testing.T) {
		path := filepath.Join(dir, "none.yaml")
		writeFile(t, path, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nenforceNodeAllocatable: [none]\nevictionHard: {memory.available: 200Mi}\n")
		s, err := loadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.eviction.Thresholds) != 1 || s.eviction.Thresholds[0].String() != "memory.available<200Mi" {
			t.Errorf("thresholds %v, want memory.available<200Mi alone", s.eviction.Thresholds)
		}
	})
	for name, doc := range map[string]string{
		"unknown field":                     "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPod: 3\n",
		"duplicate field":                   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 3\nmaxPods: 4\n",
		"wrong kind":                        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n",
		"no apiVersion":                     "kind: KubeletConfiguration\ncgroupsPerQOS: false\n",
		"bad quantity":                      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsystemReserved: {cpu: lots}\n",
		"bad port":                          "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: 70000\n",
		"bad eviction":                      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard: {memory.free: 1Gi}\n",
		"bad readOnlyPort":                  "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreadOnlyPort: 65536\n",
		"negative readOnlyPort":             "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreadOnlyPort: -1\n",
		"readOnlyPort same as port":         "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreadOnlyPort: 10250\n",
		"bad containerLogMaxSize":           "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxSize: big\n",
		"zero containerLogMaxSize":          "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxSize: \"0\"\n",
		"one containerLogMaxFiles":          "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxFiles: 1\n",
		"zero containerLogMaxWorkers":       "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxWorkers: 0\n",
		"short containerLogMonitorInterval": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMonitorInterval: 1s\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
			writeFile(t, path, doc)
			_, err := loadConfig(path)
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("loadConfig = %v, want an error naming the file", err)
			}
			for _, field := range []string{"readOnlyPort", "containerLogMaxSize", "containerLogMaxFiles", "containerLogMaxWorkers", "containerLogMonitorInterval"} {
				if strings.Contains(name, field) && (err == nil || !strings.Contains(err.Error(), field)) {
					t.Errorf("loadConfig = %v, want an error naming %s", err, field)
				}
			}
		})
	}
}

func TestSIGHUPIsAStopSignal(t *testing.T) {
	if !slices.Contains(stopSignals(), os.Signal(syscall.SIGHUP)) {
		t.Fatalf("stopSignals() = %v: SIGHUP would kill the process", stopSignals())
	}
	ctx, stop := signalContext()
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP did not end the signal context")
	}
}

// writeKubeconfig writes a kubeconfig for the node's credentials.
func writeKubeconfig(t testing.TB, s *kubetest.Server, name, path string) {
	t.Helper()
	rc := s.NodeConfig(t, name)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthority: rc.CAFile, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "node"}
	cfg.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRunAgainstAPIServer runs the command with a KubeletConfiguration,
// the node's kubeconfig and fakecri on a unix socket against a real API
// server: the Node registers with the configured taints, capacity and
// Lease and turns Ready, a pod created on it runs and is Running and Ready
// in the API server with env from a configMap, a static pod of
// staticPodPath runs and has a mirror pod, the node's events reach the
// API server, a graceful
// deletion removes the pod object, and cancelling the context stops run
// cleanly.
func TestRunAgainstAPIServer(t *testing.T) {
	const name = "edge-1"
	s := kubetest.Start(t, kubetest.Options{Nodes: []string{name}})
	admin := kubernetes.NewForConfigOrDie(s.AdminConfig())
	ctx := context.Background()
	dir := t.TempDir()

	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.90.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "unix://" + filepath.Join(dir, "cri.sock")
	lis, err := fakecri.ListenUnix(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	criCtx, stopCRI := context.WithCancel(ctx)
	criDone := make(chan error, 1)
	go func() { criDone <- fakecri.NewServer(fake, fake).Serve(criCtx, lis) }()
	t.Cleanup(func() { stopCRI(); <-criDone })

	kubeconfig := filepath.Join(dir, "kubelet.conf")
	writeKubeconfig(t, s, name, kubeconfig)
	manifests := filepath.Join(dir, "manifests")
	writeFile(t, filepath.Join(manifests, "static.yaml"), `apiVersion: v1
kind: Pod
metadata: {name: static, namespace: kube-system}
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
syncFrequency: 10s
nodeStatusUpdateFrequency: 1s
nodeStatusReportFrequency: 1m
nodeLeaseDurationSeconds: 8
address: 127.0.0.1
port: %d
readOnlyPort: %d
containerRuntimeEndpoint: %s
podLogsDir: %s
registerWithTaints: [{key: example.com/edge, effect: NoSchedule}]
maxPods: 20
systemReserved: {cpu: 100m}
kubeReserved: {cpu: 100m}
resolvConf: ""
`, manifests, port, readOnlyPort, endpoint, filepath.Join(dir, "logs")))

	errOut, stop := startRun(t, ctx, options{config: config, kubeconfig: kubeconfig, rootDir: filepath.Join(dir, "root"),
		hostnameOverride: "Edge-1", nodeIP: "127.0.0.1", verbosity: 2})

	eventually(t, 60*time.Second, "the Node Ready", func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, fmt.Sprintf("%+v", c)
			}
		}
		return false, "no Ready condition"
	})
	n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == "example.com/edge" }) {
		t.Errorf("taints = %v, want registerWithTaints' example.com/edge", n.Spec.Taints)
	}
	capCPU, allocCPU := n.Status.Capacity[v1.ResourceCPU], n.Status.Allocatable[v1.ResourceCPU]
	capCPU.Sub(allocCPU)
	if pods := n.Status.Capacity[v1.ResourcePods]; pods.Value() != 20 || capCPU.Cmp(resource.MustParse("200m")) != 0 {
		t.Errorf("capacity pods %v, cpu capacity - allocatable %v; want 20 (maxPods) and 200m (systemReserved + kubeReserved)", pods.String(), capCPU.String())
	}
	if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != int32(port) {
		t.Errorf("daemon port %d, want %d", got, port)
	}
	if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != "127.0.0.1" {
		t.Errorf("addresses %v, want 127.0.0.1 first", n.Status.Addresses)
	}
	var lease *coordinationv1.Lease
	eventually(t, 10*time.Second, "the Lease", func() (bool, string) {
		lease, err = admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if d := lease.Spec.LeaseDurationSeconds; d == nil || *d != 8 {
		t.Errorf("lease duration %v, want nodeLeaseDurationSeconds 8", d)
	}

	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"mode": "edge"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web, err := admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{NodeName: name, Containers: []v1.Container{{Name: "c", Image: "busybox",
			EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}}},
			Tolerations: []v1.Toleration{{Key: "example.com/edge", Operator: v1.TolerationOpExists}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the pod Running and Ready in the API server", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := slices.ContainsFunc(p.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.PodReady && c.Status == v1.ConditionTrue })
		return p.Status.Phase == v1.PodRunning && ready, fmt.Sprintf("phase %s, ready %v", p.Status.Phase, ready)
	})

	// The pod's env from the configMap and the API server's service, read
	// with the node's identity.
	cs, err := fake.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(web.UID)}})
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers of web: %v, %v", cs, err)
	}
	if out, _, err := fake.ExecSync(ctx, cs[0].Id, []string{"env"}, 5*time.Second); err != nil || !strings.Contains(string(out), "mode=edge\n") ||
		!strings.Contains(string(out), "KUBERNETES_SERVICE_HOST=10.0.0.1\n") {
		t.Errorf("env of web's container: %q, %v; want mode=edge from the configMap and KUBERNETES_SERVICE_HOST", out, err)
	}

	// The static pod's mirror pod carries its status, and the node's
	// events reach the API server.
	eventually(t, 30*time.Second, "the static pod's mirror pod Running", func() (bool, string) {
		p, err := admin.CoreV1().Pods("kube-system").Get(ctx, "static-"+name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Annotations["kubernetes.io/config.mirror"] != "" && p.Status.Phase == v1.PodRunning, fmt.Sprintf("%v %s", p.Annotations, p.Status.Phase)
	})
	eventually(t, 30*time.Second, "the node's Starting event", func() (bool, string) {
		list, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == name && e.Reason == "Starting" {
				return true, ""
			}
			seen = append(seen, e.InvolvedObject.Kind+"/"+e.Reason)
		}
		return false, fmt.Sprint(seen)
	})

	// The agent's server on address:port, HTTPS with a self-signed
	// certificate as the kubelet's, asking the API server about the
	// admin's token: healthy, and the static pod runs. Without a token it
	// is 401.
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer insecure.CloseIdleConnections()
	get := func(path string, token string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			return nil, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return insecure.Do(req)
	}
	adminToken := s.AdminConfig().BearerToken
	eventually(t, 30*time.Second, "the static pod Running on /pods", func() (bool, string) {
		resp, err := get("/pods", adminToken)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var list v1.PodList
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, p := range list.Items {
			seen = append(seen, p.Namespace+"/"+p.Name+" "+string(p.Status.Phase))
			if p.Name == "static-"+name && p.Status.Phase == v1.PodRunning {
				return true, ""
			}
		}
		return false, fmt.Sprint(seen)
	})
	if resp, err := get("/pods", ""); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/pods without a token: %v, %v; want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	// The read-only port answers /pods without a token, over plain HTTP.
	if resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(readOnlyPort) + "/pods"); err != nil {
		t.Errorf("read-only /pods: %v", err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Errorf("read-only /pods without a token: %d, want 200", resp.StatusCode)
	}
	resp, err := get("/healthz", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d", resp.StatusCode)
	}

	grace := int64(30)
	if err := admin.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 25*time.Second, "the pod object gone, well within its grace period", func() (bool, string) {
		_, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	stop()
	if !strings.Contains(errOut.String(), "stopped; pods are left running") {
		t.Errorf("no clean stop in the log:\n%s", errOut.String())
	}
}

// A runtime socket that is not there yet is waited for, logging "waiting
// for the runtime", until the command is stopped.
func TestRunWaitsForTheRuntime(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	clk := clocktesting.NewFakeClock(time.Now())
	var errOut syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{kubeconfig: kubeconfig, rootDir: dir, hostnameOverride: "n",
			endpoint: "unix://" + filepath.Join(dir, "absent.sock"), clock: clk}, &errOut)
	}()
	for i := 0; i < 3; i++ {
		eventually(t, 10*time.Second, "a back-off timer", func() (bool, string) { return clk.HasWaiters(), errOut.String() })
		clk.Step(5 * time.Second)
	}
	eventually(t, 10*time.Second, "three waits logged", func() (bool, string) {
		return strings.Count(errOut.String(), "waiting for the runtime") >= 3, errOut.String()
	})
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "waiting for the runtime at unix://") {
			t.Errorf("run = %v, want an error saying it was waiting for the runtime", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}
