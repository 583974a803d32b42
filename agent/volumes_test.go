package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/volumes"
	"github.com/nodekit/nodekit/volumes/volumestest"
)

// volumeAgent is an agent on fakecri with a channel source, recording
// events, whose pods directory is podsDir.
type volumeAgent struct {
	*fidelity
	podsDir string

	mu     sync.Mutex
	events []string
}

func startVolumeAgent(t *testing.T, before func(podsDir string)) *volumeAgent {
	t.Helper()
	return startVolumeAgentWith(t, before, nil)
}

// startVolumeAgentWith is startVolumeAgent with a last word on the
// agent's Config.
func startVolumeAgentWith(t *testing.T, before func(podsDir string), with func(*agent.Config)) *volumeAgent {
	t.Helper()
	dir := t.TempDir()
	fake := newFake(t)
	va := &volumeAgent{podsDir: filepath.Join(dir, "pods")}
	va.fidelity = &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	if before != nil {
		before(va.podsDir)
	}
	cfg := agent.Config{
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{va.api}, StatusSink: va.history,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI: cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: va.podsDir, ResolvConf: "-"},
		Events: func(pod *v1.Pod, typ, reason, msg string) {
			if pod == nil {
				return
			}
			va.mu.Lock()
			defer va.mu.Unlock()
			va.events = append(va.events, pod.Name+" "+typ+" "+reason+" "+msg)
		},
	}
	if with != nil {
		with(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	return va
}

func (va *volumeAgent) hasEvent(prefix string) bool {
	va.mu.Lock()
	defer va.mu.Unlock()
	return slices.ContainsFunc(va.events, func(e string) bool { return strings.HasPrefix(e, prefix) })
}

// mounts returns the CRI mounts of the pod's container, as fakecri
// recorded them.
func (va *volumeAgent) mounts(pod *v1.Pod, container string) []*runtimeapi.Mount {
	va.t.Helper()
	ctx := context.Background()
	cs, err := va.fake.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(pod.UID)}})
	if err != nil {
		va.t.Fatal(err)
	}
	for _, c := range cs {
		if c.GetMetadata().GetName() != container {
			continue
		}
		st, err := va.fake.ContainerStatus(ctx, c.GetId(), false)
		if err != nil {
			va.t.Fatal(err)
		}
		return st.GetStatus().GetMounts()
	}
	va.t.Fatalf("pod %s has no container %s", pod.Name, container)
	return nil
}

func TestVolumesBecomeTheKubeletsCRIMounts(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host", "data")
	va := startVolumeAgent(t, nil)
	va.send(podsource.SET)
	pod := apiPod("vols", v1.RestartPolicyAlways, []string{"main"})
	dirOrCreate := v1.HostPathDirectoryOrCreate
	pod.Spec.Volumes = []v1.Volume{
		{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host, Type: &dirOrCreate}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "cache", MountPath: "/cache"},
		{Name: "host", MountPath: "/host", ReadOnly: true},
		{Name: "cache", MountPath: "/logs", SubPath: "logs/main"},
	}
	va.send(podsource.ADD, pod)
	va.waitFor("vols", "runs", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })

	podDir := filepath.Join(va.podsDir, string(pod.UID))
	cache := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "cache")
	var got []*runtimeapi.Mount
	for _, m := range va.mounts(pod, "main") {
		if m.ContainerPath != v1.TerminationMessagePathDefault {
			got = append(got, m)
		}
	}
	want := []*runtimeapi.Mount{
		{ContainerPath: "/cache", HostPath: cache},
		{ContainerPath: "/host", HostPath: host, Readonly: true},
		{ContainerPath: "/logs", HostPath: filepath.Join(cache, "logs", "main")},
		// The pod's hosts file, the kubelet's.
		{ContainerPath: "/etc/hosts", HostPath: filepath.Join(podDir, "etc-hosts")},
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b *runtimeapi.Mount) bool {
		return a.ContainerPath == b.ContainerPath && a.HostPath == b.HostPath && a.Readonly == b.Readonly
	})); d != "" {
		t.Fatalf("CRI mounts (-want +got):\n%s", d)
	}
	if st, err := os.Stat(host); err != nil || !st.IsDir() {
		t.Fatalf("DirectoryOrCreate did not create %s: %v", host, err)
	}

	va.delete(pod)
	eventually(t, "the pod's volume directory is removed", func() bool {
		_, err := os.Stat(filepath.Join(podDir, "volumes"))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(host); err != nil {
		t.Fatalf("the hostPath went with the pod: %v", err)
	}
}

func TestPodWithBadVolumesWaitsWhileOthersRun(t *testing.T) {
	va := startVolumeAgent(t, nil)
	va.send(podsource.SET)
	undefined := apiPod("undefined", v1.RestartPolicyAlways, []string{"main"})
	undefined.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "missing", MountPath: "/m"}}
	unsupported := apiPod("unsupported", v1.RestartPolicyAlways, []string{"main"})
	unsupported.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "nfs", Path: "/x"}}}}
	unsupported.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	good := apiPod("good", v1.RestartPolicyAlways, []string{"main"})
	good.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	good.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	wrongType := apiPod("wrongtype", v1.RestartPolicyAlways, []string{"main"})
	fileType, dir := v1.HostPathFile, t.TempDir()
	wrongType.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &fileType}}}}
	wrongType.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/host"}}
	va.send(podsource.ADD, undefined, unsupported, wrongType, good)

	va.waitFor("good", "runs", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	for _, want := range []string{
		// A mount of no volume is refused before it reaches the volume
		// manager, by the sources' validation.
		`undefined Warning FailedValidation pod default/undefined (UID "undefined-uid") from source api: spec.containers[0].volumeMounts[0].name: Not found: "missing"`,
		`unsupported Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: pod default/unsupported: spec.volumes[0] (data): no volume plugin supports its type (nfs)`,
		`wrongtype Warning FailedMount MountVolume.SetUp failed for volume "host" : hostPath type check failed: ` + dir + ` is not a file, it's a Directory`,
		`wrongtype Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[host], unattached volumes=[], failed to process volumes=[]: pod default/wrongtype: spec.volumes[0] (host): hostPath type check failed: ` + dir + ` is not a file, it's a Directory`,
	} {
		eventuallyShowing(t, "the event "+want, func() bool { return va.hasEvent(want) }, func() string { va.mu.Lock(); defer va.mu.Unlock(); return strings.Join(va.events, "\n") })
	}
	s := va.waitFor("unsupported", "is pending", func(s v1.PodStatus) bool { return s.Phase == v1.PodPending })
	if len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].State.Waiting == nil || s.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
		t.Fatalf("unsupported: container statuses %+v, want main waiting in ContainerCreating", s.ContainerStatuses)
	}
	for _, name := range []string{"undefined", "unsupported", "wrongtype"} {
		sbs, err := va.fake.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelPodUID: name + "-uid"}})
		if err != nil || len(sbs) != 0 {
			t.Fatalf("%s: sandboxes %v, %v; nothing may start before its volumes", name, sbs, err)
		}
	}
}

func TestOrphanedPodDirectoriesAreRemovedAtStart(t *testing.T) {
	var orphanDir, adopted string
	va := startVolumeAgent(t, func(podsDir string) {
		orphanDir = filepath.Join(podsDir, "gone-uid")
		adopted = filepath.Join(podsDir, "stays-uid", "volumes", "kubernetes.io~empty-dir", "cache", "kept")
		for _, f := range []string{
			filepath.Join(orphanDir, "volumes", "kubernetes.io~empty-dir", "cache", "f"),
			filepath.Join(orphanDir, "containers", "main", "0a1b"),
			adopted,
		} {
			if err := os.MkdirAll(filepath.Dir(f), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	})
	stays := apiPod("stays", v1.RestartPolicyAlways, []string{"main"})
	stays.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	stays.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	// Nothing is removed before every source has delivered its pods.
	time.Sleep(200 * time.Millisecond) // several housekeeping periods
	if _, err := os.Stat(orphanDir); err != nil {
		t.Fatalf("an orphan was removed before the sources were seen: %v", err)
	}
	va.send(podsource.SET, stays)
	eventually(t, "the orphaned pod directory is removed", func() bool {
		_, err := os.Stat(orphanDir)
		return os.IsNotExist(err)
	})
	va.waitFor("stays", "runs", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	if _, err := os.Stat(adopted); err != nil {
		t.Fatalf("the volume of a pod its source still holds lost its content: %v", err)
	}
}

// A pod with the volumes of a pod of a cluster (a configMap, and the
// projected service-account volume every pod gets) waits while its
// configMap is missing, with the kubelet's FailedMount, and starts once
// it appears; the files are on the disk where the runtime mounts them.
func TestContentVolumesWaitForTheirObjects(t *testing.T) {
	objects := &volumes.Objects{}
	tokens := &volumestest.Tokens{}
	va := startVolumeAgentWith(t, nil, func(c *agent.Config) {
		c.CRI.Objects = objects
		c.Tokens = tokens
	})
	va.send(podsource.SET)
	pod := apiPod("app", v1.RestartPolicyAlways, []string{"main"})
	pod.Spec.ServiceAccountName = "default"
	exp := int64(3607)
	pod.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}}},
		{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "config", MountPath: "/etc/app"},
		{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
	}
	va.send(podsource.ADD, pod)
	want := `app Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[config], unattached volumes=[], failed to process volumes=[]: pod default/app: spec.volumes[0] (config): `
	eventuallyShowing(t, "a FailedMount for the missing configMap", func() bool { return va.hasEvent(want) }, func() string {
		va.mu.Lock()
		defer va.mu.Unlock()
		return strings.Join(va.events, "\n")
	})
	va.waitFor("app", "waits", func(s v1.PodStatus) bool { return s.Phase == v1.PodPending })

	objects.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}, Data: map[string]string{"level": "debug"}})
	va.waitFor("app", "runs once its configMap exists", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	byPath := map[string]string{}
	for _, m := range va.mounts(pod, "main") {
		byPath[m.ContainerPath] = m.HostPath
		// Content volumes are mounted read-only, as the kubelet mounts
		// them, whatever the volumeMount says.
		if m.ContainerPath != v1.TerminationMessagePathDefault && m.ContainerPath != "/etc/hosts" && !m.Readonly {
			t.Errorf("the mount at %s is writable; content volumes are mounted read-only", m.ContainerPath)
		}
	}
	for path, wantContent := range map[string]string{
		"/etc/app/level": "debug",
		"/var/run/secrets/kubernetes.io/serviceaccount/namespace": "default",
	} {
		dir, file := filepath.Split(path)
		host, ok := byPath[strings.TrimSuffix(dir, "/")]
		if !ok {
			t.Fatalf("no CRI mount at %s: %v", dir, byPath)
		}
		b, err := os.ReadFile(filepath.Join(host, file))
		if err != nil || string(b) != wantContent {
			t.Errorf("%s: %q, %v; want %q", path, b, err, wantContent)
		}
	}
	if b, err := os.ReadFile(filepath.Join(byPath["/var/run/secrets/kubernetes.io/serviceaccount"], "token")); err != nil || len(b) == 0 {
		t.Errorf("the projected token: %q, %v", b, err)
	}
	if reqs := tokens.Requests(); len(reqs) == 0 {
		t.Error("no token was asked for")
	}
	// The projected volume is a tmpfs where the agent may mount: deleted,
	// the pod's volumes are unmounted and removed.
	va.delete(pod)
	eventually(t, "the pod's volume directory is removed", func() bool {
		_, err := os.Stat(filepath.Join(va.podsDir, string(pod.UID), "volumes"))
		return os.IsNotExist(err)
	})
}
