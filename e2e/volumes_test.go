package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/volumes"
	"github.com/nodekit/nodekit/volumes/volumestest"
)

// TestVolumesOnContainerd runs the agent on the e2e containerd with one
// pod whose containers share an emptyDir (one writes, the other reads
// what it wrote), find a hostPath mounted read-only refusing writes, see
// the emptyDir owned by the pod's fsGroup, and see a Memory emptyDir as a
// tmpfs of its sizeLimit in /proc/mounts; each reports through its
// termination message. Once the manifest is gone the pod's volumes are
// removed and its tmpfs unmounted from the host.
func TestVolumesOnContainerd(t *testing.T) {
	client, image := dialContainerd(t)
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(dir, "host")
	podsDir := filepath.Join(dir, "pods")
	doc := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: vols}
spec:
  hostNetwork: true
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  securityContext: {fsGroup: 2000}
  volumes:
  - {name: shared, emptyDir: {}}
  - {name: host, hostPath: {path: %s, type: DirectoryOrCreate}}
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 4Mi}}
  containers:
  - name: writer
    image: %[2]s
    command: ["sh", "-c", "echo hello > /shared/msg"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  - name: reader
    image: %[2]s
    command: ["sh", "-c", "i=0; while [ ! -s /data/msg ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; cat /data/msg > /dev/termination-log"]
    volumeMounts: [{name: shared, mountPath: /data}]
  - name: readonly
    image: %[2]s
    command: ["sh", "-c", "if touch /ro/f 2>/tmp/err; then echo writable; else cat /tmp/err; fi > /dev/termination-log"]
    volumeMounts: [{name: host, mountPath: /ro, readOnly: true}]
  - name: group
    image: %[2]s
    securityContext: {runAsUser: 1000}
    command: ["sh", "-c", "stat -c '%%g %%a' /g > /dev/termination-log"]
    volumeMounts: [{name: shared, mountPath: /g}]
  - name: memory
    image: %[2]s
    command: ["sh", "-c", "grep ' /mem ' /proc/mounts > /dev/termination-log"]
    volumeMounts: [{name: mem, mountPath: /mem}]
`, host, image)
	manifest := filepath.Join(manifests, "vols.yaml")
	if err := os.WriteFile(manifest, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	node := "e2e-volumes"
	src, err := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: node, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName: node, NodeIPs: []string{"127.0.0.1"}, RuntimeService: client, ImageService: client,
		Sources: []podsource.Source{src}, HousekeepingPeriod: 500 * time.Millisecond,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: podsDir, ResolvConf: "-"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		removePodsOf(t, client, node)
		unmountUnder(podsDir)
	})

	wait := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not %s within %v", what, limit)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	var pod *v1.Pod
	wait("vols Succeeded", 90*time.Second, func() bool {
		for _, p := range a.Pods() {
			if p.Name == "vols-"+node {
				pod = p
				return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
			}
		}
		return false
	})
	msgs := map[string]string{}
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Terminated == nil {
			t.Fatalf("container %s has not terminated: %+v", c.Name, c.State)
		}
		msgs[c.Name] = c.State.Terminated.Message
	}
	if pod.Status.Phase != v1.PodSucceeded {
		t.Fatalf("phase %s; messages %q", pod.Status.Phase, msgs)
	}
	if msgs["reader"] != "hello\n" {
		t.Errorf("the reader read %q from the shared emptyDir, want the writer's %q", msgs["reader"], "hello\n")
	}
	if !strings.Contains(msgs["readonly"], "Read-only file system") {
		t.Errorf("writing to the read-only hostPath: %q, want a Read-only file system error", msgs["readonly"])
	}
	if _, err := os.Stat(filepath.Join(host, "f")); !os.IsNotExist(err) {
		t.Errorf("a file appeared in the read-only hostPath: %v", err)
	}
	if msgs["group"] != "2000 2777\n" {
		t.Errorf("the emptyDir's group and mode as a container of user 1000 sees them: %q, want the fsGroup 2000 and 2777 (setgid, rwx for all)", msgs["group"])
	}
	if f := strings.Fields(msgs["memory"]); len(f) < 4 || f[0] != "tmpfs" || f[1] != "/mem" || f[2] != "tmpfs" || !strings.Contains(f[3], "size=4096k") {
		t.Errorf("/mem in the container's /proc/mounts: %q, want a tmpfs of size 4096k", msgs["memory"])
	}

	volumesDir := filepath.Join(podsDir, string(pod.UID), "volumes")
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	wait("the pod's volumes removed", 60*time.Second, func() bool {
		_, err := os.Stat(volumesDir)
		return os.IsNotExist(err) && !mountedUnder(podsDir)
	})
	if _, err := os.Stat(host); err != nil {
		t.Errorf("the hostPath went with the pod: %v", err)
	}
}

// mountedUnder reports whether something is mounted under dir.
func mountedUnder(dir string) bool {
	b, _ := os.ReadFile("/proc/mounts")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			return true
		}
	}
	return false
}

// unmountUnder unmounts what a failed test left mounted under dir.
func unmountUnder(dir string) {
	b, _ := os.ReadFile("/proc/mounts")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			_ = unix.Unmount(f[1], unix.MNT_DETACH)
		}
	}
}

// TestVolumesSurviveAgentRestart stops the agent while a pod runs and
// starts another on the same directories: the new agent adopts the pod
// without restarting it, its emptyDir keeps what the container wrote,
// and a pod directory left by a pod no source holds any more is removed.
func TestVolumesSurviveAgentRestart(t *testing.T) {
	client, image := dialContainerd(t)
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	podsDir := filepath.Join(dir, "pods")
	manifest := filepath.Join(manifests, "keep.yaml")
	doc := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: keep}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  volumes: [{name: data, emptyDir: {}}]
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; echo one > /data/f; while true; do sleep 1; done"]
    volumeMounts: [{name: data, mountPath: /data}]
`, image)
	if err := os.WriteFile(manifest, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	node := "e2e-volumes-restart"
	run := func() (*agent.Agent, func()) {
		src, err := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: node, Period: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		a, err := agent.New(agent.Config{
			NodeName: node, NodeIPs: []string{"127.0.0.1"}, RuntimeService: client, ImageService: client,
			Sources: []podsource.Source{src}, HousekeepingPeriod: 500 * time.Millisecond,
			CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: podsDir, ResolvConf: "-"},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		return a, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		}
	}
	t.Cleanup(func() {
		removePodsOf(t, client, node)
		unmountUnder(podsDir)
	})
	wait := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not %s within %v", what, limit)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	running := func(a *agent.Agent) (*v1.Pod, bool) {
		for _, p := range a.Pods() {
			if p.Name == "keep-"+node && p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				return p, true
			}
		}
		return nil, false
	}

	a, stop := run()
	var pod *v1.Pod
	wait("keep Running", 60*time.Second, func() bool { var ok bool; pod, ok = running(a); return ok })
	file := filepath.Join(volumes.VolumeDir(filepath.Join(podsDir, string(pod.UID)), volumes.EmptyDirPluginName, "data"), "f")
	wait("the container's file in the emptyDir", 30*time.Second, func() bool {
		b, err := os.ReadFile(file)
		return err == nil && string(b) == "one\n"
	})
	stop()
	// A pod directory of a pod no source holds, as a run can leave it.
	orphan := filepath.Join(podsDir, "0a1b2c3d-gone", "volumes", "kubernetes.io~empty-dir", "x")
	if err := os.MkdirAll(orphan, 0o750); err != nil {
		t.Fatal(err)
	}

	a, stop = run()
	defer stop()
	wait("keep adopted, Running", 60*time.Second, func() bool { _, ok := running(a); return ok })
	wait("the orphaned pod directory removed", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Dir(filepath.Dir(filepath.Dir(orphan))))
		return os.IsNotExist(err)
	})
	p, _ := running(a)
	if p.UID != pod.UID || p.Status.ContainerStatuses[0].RestartCount != 0 || p.Status.ContainerStatuses[0].ContainerID != pod.Status.ContainerStatuses[0].ContainerID {
		t.Fatalf("the pod was not adopted as it ran: before %s %s, after %s %s restarts %d", pod.UID, pod.Status.ContainerStatuses[0].ContainerID, p.UID, p.Status.ContainerStatuses[0].ContainerID, p.Status.ContainerStatuses[0].RestartCount)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "one\n" {
		t.Fatalf("the emptyDir after the restart: %q, %v; want what the container wrote", b, err)
	}
}

// TestContentVolumesOnContainerd runs a pod with a configMap volume and
// a projected volume like the API server's kube-api-access (a
// service-account token and the namespace) on the e2e containerd. A
// container cats the configMap's file into an emptyDir the test reads:
// the content is there, and an update of the configMap shows in the
// container within the volume manager's sync period (1s here, 1 min by
// default). Another container reports the token file's mode and group
// (0640 and the fsGroup: the kubelet writes a token 0600 when the pod
// has an fsGroup, which then gets group read), the token and the
// namespace file.
func TestContentVolumesOnContainerd(t *testing.T) {
	client, image := dialContainerd(t)
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	podsDir := filepath.Join(dir, "pods")
	const ns = "e2e-content"
	doc := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: content, namespace: %s}
spec:
  hostNetwork: true
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  serviceAccountName: app
  securityContext: {fsGroup: 2000}
  volumes:
  - {name: cfg, configMap: {name: settings}}
  - {name: out, emptyDir: {}}
  - name: sa
    projected:
      sources:
      - serviceAccountToken: {path: token, expirationSeconds: 3600}
      - downwardAPI: {items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]}
  containers:
  - name: watch
    image: %[2]s
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do cat /cfg/greeting > /out/seen.tmp; mv /out/seen.tmp /out/seen; sleep 0.2; done"]
    volumeMounts: [{name: cfg, mountPath: /cfg}, {name: out, mountPath: /out}]
  - name: token
    image: %[2]s
    command: ["sh", "-c", "d=/var/run/secrets/kubernetes.io/serviceaccount; { stat -L -c '%%a %%g' $d/token; cat $d/namespace; echo; cat $d/token; } > /dev/termination-log"]
    volumeMounts: [{name: sa, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}]
`, ns, image)
	if err := os.WriteFile(filepath.Join(manifests, "content.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := &volumes.Objects{}
	settings := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"greeting": "hello"}}
	objs.SetConfigMap(settings)
	vm, err := volumes.New(volumes.Config{
		PodsDir:    podsDir,
		Plugins:    volumes.DefaultPlugins(volumes.PluginConfig{Objects: objs, Tokens: &volumestest.Tokens{}}),
		SyncPeriod: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	node := "e2e-content"
	src, err := podsource.NewFile(podsource.FileConfig{Dir: manifests, NodeName: node, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName: node, NodeIPs: []string{"127.0.0.1"}, RuntimeService: client, ImageService: client,
		Sources: []podsource.Source{src}, HousekeepingPeriod: 500 * time.Millisecond, Volumes: vm,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: podsDir, ResolvConf: "-", Objects: objs},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		removePodsOf(t, client, node)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		unmountUnder(podsDir)
	})
	wait := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not %s within %v", what, limit)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var pod *v1.Pod
	wait("content Running", 60*time.Second, func() bool {
		for _, p := range a.Pods() {
			if p.Name == "content-"+node && p.Status.Phase == v1.PodRunning {
				pod = p
				return true
			}
		}
		return false
	})
	seen := filepath.Join(volumes.VolumeDir(filepath.Join(podsDir, string(pod.UID)), volumes.EmptyDirPluginName, "out"), "seen")
	read := func() string { b, _ := os.ReadFile(seen); return string(b) }
	wait("the configMap's file seen in the container", 30*time.Second, func() bool { return read() != "" })
	if got := read(); got != "hello" {
		t.Fatalf("the container cat the configMap's file: %q, want %q", got, "hello")
	}

	settings.Data["greeting"] = "bye"
	objs.SetConfigMap(settings)
	updated := time.Now()
	wait("the configMap's update seen in the container", 20*time.Second, func() bool { return read() == "bye" })
	t.Logf("the update reached the container in %v", time.Since(updated).Round(100*time.Millisecond))

	var msg string
	wait("the token container terminated", 30*time.Second, func() bool {
		for _, p := range a.Pods() {
			if p.UID != pod.UID {
				continue
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.Name == "token" && c.State.Terminated != nil {
					msg = c.State.Terminated.Message
					return true
				}
			}
		}
		return false
	})
	lines := strings.Split(msg, "\n")
	if len(lines) != 3 {
		t.Fatalf("the token container reported %q, want the token's mode and group, the namespace and the token", msg)
	}
	if lines[0] != "640 2000" {
		t.Errorf("the token file's mode and group in the container: %q, want %q (0600 written, group read from the fsGroup)", lines[0], "640 2000")
	}
	if lines[1] != ns {
		t.Errorf("the namespace file reads %q, want %q", lines[1], ns)
	}
	if !strings.HasPrefix(lines[2], "token-") || !strings.Contains(lines[2], ":"+ns+"/app:") {
		t.Errorf("the token file reads %q, want a token of the service account %s/app", lines[2], ns)
	}
}
