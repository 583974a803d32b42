package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	authenticationv1 "k8s.io/api/authentication/v1"
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

const staticManifest = `apiVersion: v1
kind: Pod
metadata:
  name: static
  namespace: default
spec:
  containers:
  - name: c
    image: %s
`

// TestNodeExtrasAgainstAPIServer runs a whole node with the node's own
// credentials against a real API server, with mirror pods, events, the
// configMap getter and tokens: a static pod gets a mirror pod that
// carries its status, comes back when deleted, follows the manifest and
// goes with it; the node's and the pods' events reach the API server; a
// pod's env from a configMap reaches its container; a token is issued
// for a pod's service account, into its projected volume too; and a 30s outage of the API server loses
// no status and no pod.
func TestNodeExtrasAgainstAPIServer(t *testing.T) {
	const name = "node-m"
	s := apiservertest.Start(t, apiservertest.Options{Nodes: []string{name}})
	admin := kubernetes.NewForConfigOrDie(s.AdminConfig())
	client := kubernetes.NewForConfigOrDie(s.NodeConfig(t, name))
	ctx := context.Background()

	dir := t.TempDir()
	// The agent leaves its pods, and their tmpfs volumes, in place when
	// it stops; this runs after it has stopped, before dir is removed.
	t.Cleanup(func() { unmountUnder(dir) })
	manifests := filepath.Join(dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeManifest := func(image string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(manifests, "static.yaml"), fmt.Appendf(nil, staticManifest, image), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeManifest("busybox:1")

	fake, err := fakecri.New(fakecri.Config{PodCIDR: "127.90.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	mirrors, err := kube.NewMirrorPods(kube.MirrorPodsConfig{Client: client, NodeName: name, ResyncPeriod: time.Second, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	file, err := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: name, Period: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	src, err := kube.NewPodSource(kube.PodSourceConfig{Client: client, NodeName: name, MirrorPods: mirrors})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := kube.NewStatusSink(kube.StatusSinkConfig{Client: client, MirrorPods: true, QPS: 50, Burst: 100, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	deleter, err := kube.NewPodDeleter(kube.PodDeleterConfig{Client: client, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	events, err := kube.NewEventRecorder(kube.EventRecorderConfig{Client: client, NodeName: name})
	if err != nil {
		t.Fatal(err)
	}
	objects, err := kube.NewObjects(kube.ObjectsConfig{Client: client, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := kube.NewTokens(kube.TokensConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName: name, RuntimeService: fake, ImageService: fake, Tokens: tokens,
		Sources:    []podsource.Source{src, mirrors.Source(file)},
		StatusSink: sink, PodTerminated: deleter.PodTerminated, Events: events.Event,
		RelistPeriod: 100 * time.Millisecond, HousekeepingPeriod: 200 * time.Millisecond, BackOffPeriod: 200 * time.Millisecond,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-", Objects: objects},
	})
	if err != nil {
		t.Fatal(err)
	}
	node, err := kube.NewNode(kube.NodeConfig{
		Client: client, Name: name, Runtime: fake, Health: a.Healthy, Events: events.Event,
		NodeStatusUpdateFrequency: 500 * time.Millisecond, LeaseDuration: 4 * time.Second, LeaseRenewInterval: time.Second,
		RequestTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	runs := []func(context.Context) error{events.Run, objects.Run, mirrors.Run, a.Run, node.Run}
	done := make(chan error, len(runs))
	for _, run := range runs {
		go func() { done <- run(runCtx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range runs {
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

	getPod := func(ns, n string) (*v1.Pod, error) { return admin.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{}) }
	const mirrorName = "static-" + name
	var mirror *v1.Pod
	eventually(t, 30*time.Second, "the static pod's mirror pod, Running", func() (bool, string) {
		p, err := getPod("default", mirrorName)
		if err != nil {
			return false, err.Error()
		}
		mirror = p
		return p.Status.Phase == v1.PodRunning, fmt.Sprintf("phase %q, annotations %v", p.Status.Phase, p.Annotations)
	})
	nodeObj, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := mirror.OwnerReferences; len(o) != 1 || o[0].Kind != "Node" || o[0].UID != nodeObj.UID {
		t.Fatalf("mirror pod owners %+v; want the Node %s", o, nodeObj.UID)
	}
	hash := mirror.Annotations[podsource.AnnotationConfigMirror]
	if hash == "" || mirror.Spec.Containers[0].Image != "busybox:1" {
		t.Fatalf("mirror pod annotations %v, image %s", mirror.Annotations, mirror.Spec.Containers[0].Image)
	}

	// Deleted by an administrator, the mirror pod comes back.
	if err := admin.CoreV1().Pods("default").Delete(ctx, mirrorName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted mirror pod back", func() (bool, string) {
		p, err := getPod("default", mirrorName)
		if err != nil {
			return false, err.Error()
		}
		return p.UID != mirror.UID && p.DeletionTimestamp == nil, string(p.UID)
	})
	// A changed manifest replaces it.
	writeManifest("busybox:2")
	eventually(t, 30*time.Second, "the mirror pod of the new manifest", func() (bool, string) {
		p, err := getPod("default", mirrorName)
		if err != nil {
			return false, err.Error()
		}
		return p.Annotations[podsource.AnnotationConfigMirror] != hash && p.Spec.Containers[0].Image == "busybox:2", p.Spec.Containers[0].Image
	})

	// Env from a configMap, and a token for the pod's service account.
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	envPod := apiPod("default", "envpod", "", name, 0)
	envPod.Spec.ServiceAccountName = "sa"
	// NodeRestriction issues tokens for the audiences the pod's volumes
	// name.
	envPod.Spec.Volumes = []v1.Volume{{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Audience: "api", Path: "token"}}}}}}}
	envPod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "token", MountPath: "/var/run/secrets/tokens"}}
	envPod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}}}
	created, err := admin.CoreV1().Pods("default").Create(ctx, envPod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the pod with env from a configMap Running", func() (bool, string) {
		p, err := getPod("default", "envpod")
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning, fmt.Sprintf("%s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	cs, err := fake.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(created.UID)}})
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers of envpod: %v, %v", cs, err)
	}
	envContainer := cs[0].Id
	out, _, err := fake.ExecSync(ctx, envContainer, []string{"env"}, 5*time.Second)
	if err != nil || !strings.Contains(string(out), "GREETING=hello\n") {
		t.Fatalf("env of the container: %q, %v; want GREETING=hello", out, err)
	}
	// The agent's volume manager got the projected token through Tokens.
	files, _ := filepath.Glob(filepath.Join(dir, "pods", string(created.UID), "volumes", "*", "token", "token"))
	if len(files) != 1 {
		t.Fatalf("projected token files of envpod: %v; want one", files)
	}
	if b, err := os.ReadFile(files[0]); err != nil || len(b) < 20 {
		t.Fatalf("projected token of envpod: %q, %v", b, err)
	}
	exp := int64(3600)
	tr, err := tokens.GetServiceAccountToken(ctx, "default", "sa", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{"api"}, ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "envpod", UID: created.UID},
	}})
	if err != nil || tr.Status.Token == "" {
		t.Fatalf("token for envpod's service account with the node's credentials: %v, %v", tr, err)
	}

	// The node's events and the pods' reach the API server.
	eventually(t, 30*time.Second, "the node's and the pod's events", func() (bool, string) {
		list, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		seen := map[string]bool{}
		for _, e := range list.Items {
			seen[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+"/"+e.Reason] = true
		}
		want := []string{"Node/" + name + "/Starting", "Node/" + name + "/RegisteredNode", "Node/" + name + "/NodeReady", "Pod/envpod/Started"}
		for _, w := range want {
			if !seen[w] {
				return false, fmt.Sprintf("no %s among %v", w, seen)
			}
		}
		return true, ""
	})

	// The static pod goes: so does its mirror pod.
	if err := os.Remove(filepath.Join(manifests, "static.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the mirror pod gone with its manifest", func() (bool, string) {
		_, err := getPod("default", mirrorName)
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	// A 30s outage: a pod finishes meanwhile; nothing is lost.
	job := apiPod("default", "job", "", name, 0)
	job.Spec.RestartPolicy = v1.RestartPolicyNever
	job.Spec.Containers[0].Env = []v1.EnvVar{{Name: fakecri.EnvExitAfter, Value: "5s"}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the job Running", func() (bool, string) {
		p, err := getPod("default", "job")
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning, string(p.Status.Phase)
	})
	// The API server stops listening as soon as it gets SIGTERM (it may
	// then take up to 15s to exit): the outage counts from there.
	stopped := time.Now()
	s.StopAPIServer(t)
	time.Sleep(30*time.Second - time.Since(stopped))
	s.StartAPIServer(t)
	back := time.Now()
	t.Logf("API server away for %v", back.Sub(stopped).Round(time.Millisecond))
	// The agent's status retries back off up to 40s after a 30s outage.
	eventually(t, 60*time.Second, "the job's Succeeded, reached during the outage, in the API server", func() (bool, string) {
		p, err := getPod("default", "job")
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodSucceeded, string(p.Status.Phase)
	})
	t.Logf("the job's final status reached the API server %v after it was back", time.Since(back).Round(time.Millisecond))
	p, err := getPod("default", "envpod")
	if err != nil || p.Status.Phase != v1.PodRunning || p.DeletionTimestamp != nil {
		t.Fatalf("envpod after the outage: %v, %v", p, err)
	}
	cs, err = fake.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(created.UID)}})
	if err != nil || len(cs) != 1 || cs[0].Id != envContainer || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("envpod's containers after the outage: %v, %v; want %s still running", cs, err, envContainer)
	}
	restarted := time.Now()
	eventually(t, 30*time.Second, "the node's lease renewed after the outage", func() (bool, string) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime.Time.After(restarted.Add(-time.Millisecond)), fmt.Sprintf("renewTime %v", l.Spec.RenewTime)
	})
}

// unmountUnder unmounts what is mounted under dir.
func unmountUnder(dir string) {
	b, _ := os.ReadFile("/proc/mounts")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			_ = unix.Unmount(f[1], unix.MNT_DETACH)
		}
	}
}
