package cri_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// localhostLines open every hosts file of a pod on the pod network.
const localhostLines = "# Kubernetes-managed hosts file.\n" +
	"127.0.0.1\tlocalhost\n" +
	"::1\tlocalhost ip6-localhost ip6-loopback\n" +
	"fe00::0\tip6-localnet\n" +
	"fe00::0\tip6-mcastprefix\n" +
	"fe00::1\tip6-allnodes\n" +
	"fe00::2\tip6-allrouters\n"

// hostsHarness is a harness whose pods directory and node hosts file
// the test knows.
func hostsHarness(t *testing.T, opts ...func(*cri.Config)) (h *harness, podsDir, nodeHosts string) {
	t.Helper()
	podsDir = t.TempDir()
	nodeHosts = filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1\tlocalhost\n192.0.2.7\tnode-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts = append([]func(*cri.Config){func(c *cri.Config) {
		c.PodsDir, c.NodeHostsFile, c.ClusterDomain = podsDir, nodeHosts, "cluster.local"
	}}, opts...)
	return newHarness(t, fakecri.Config{}, opts...), podsDir, nodeHosts
}

// hostsMountOf returns the container's mount at /etc/hosts, or nil.
func hostsMountOf(cfg *runtimeapi.ContainerConfig) *runtimeapi.Mount {
	for _, m := range cfg.GetMounts() {
		if m.GetContainerPath() == "/etc/hosts" {
			return m
		}
	}
	return nil
}

// podIP is the pod's IP as the runtime reports it.
func (h *harness) podIP(t *testing.T, pod *v1.Pod) string {
	t.Helper()
	st := h.status(pod)
	if len(st.SandboxStatuses) == 0 || len(st.SandboxStatuses[0].IPs) == 0 {
		t.Fatalf("the pod's sandbox has no IP: %+v", st.SandboxStatuses)
	}
	return st.SandboxStatuses[0].IPs[0]
}

func TestEtcHostsIsManagedForPodNetworkPods(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*v1.Pod)
		want func(ip string) string // the file after the localhost lines
	}{
		{"pod name", func(*v1.Pod) {}, func(ip string) string { return ip + "\tp\n" }},
		{"hostname", func(p *v1.Pod) { p.Spec.Hostname = "web" }, func(ip string) string { return ip + "\tweb\n" }},
		{"hostname and subdomain", func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "web", "svc1" },
			func(ip string) string { return ip + "\tweb.svc1.ns.svc.cluster.local\tweb\n" }},
		{"hostnameOverride wins over hostname and subdomain", func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostnameOverride = "web", "svc1", ptr.To("override.example.host")
		}, func(ip string) string { return ip + "\toverride.example.host\n" }},
		{"hostAliases", func(p *v1.Pod) {
			p.Spec.HostAliases = []v1.HostAlias{
				{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}},
				{IP: "2001:db8::1", Hostnames: []string{"v6"}},
			}
		}, func(ip string) string {
			return ip + "\tp\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n2001:db8::1\tv6\n"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, podsDir, _ := hostsHarness(t)
			pod := testPod(v1.RestartPolicyAlways, []string{"init"}, "app", "side")
			withEnv(&pod.Spec.InitContainers[0], fakecri.EnvExitCode, "0")
			tc.edit(pod)
			for range 3 { // the init container, then the others
				h.sync(pod)
			}
			ip := h.podIP(t, pod)
			want := filepath.Join(podsDir, string(pod.UID), "etc-hosts")
			for _, name := range []string{"init", "app", "side"} {
				m := hostsMountOf(h.rec.config(name))
				if m == nil || m.GetHostPath() != want || m.GetReadonly() || !m.GetSelinuxRelabel() {
					t.Errorf("%s: /etc/hosts mount %v, want %s, writable, relabelled", name, m, want)
				}
			}
			got, err := os.ReadFile(want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(localhostLines+tc.want(ip), string(got)); diff != "" {
				t.Errorf("hosts file (-want +got):\n%s", diff)
			}
			if st, err := os.Stat(want); err != nil || st.Mode().Perm() != 0o644 {
				t.Errorf("hosts file mode %v (%v), want 0644", st.Mode(), err)
			}
		})
	}
}

func TestEtcHostsOfHostNetworkPodsIsTheNodesWithHostAliases(t *testing.T) {
	h, podsDir, _ := hostsHarness(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.HostNetwork = true
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}}
	h.sync(pod)
	if hostsMountOf(h.rec.config("app")) == nil {
		t.Fatal("the container of a host-network pod got no /etc/hosts")
	}
	got, err := os.ReadFile(filepath.Join(podsDir, string(pod.UID), "etc-hosts"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n192.0.2.7\tnode-1\n" +
		"\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("hosts file (-want +got):\n%s", diff)
	}
}

func TestEtcHostsIsNotMountedOverAContainersOwnMount(t *testing.T) {
	hostsDir := t.TempDir()
	h, _, _ := hostsHarness(t, func(c *cri.Config) { c.Volumes = volumeDirs{"host-etc-hosts": hostsDir} })
	pod := testPod(v1.RestartPolicyAlways, nil, "own", "other")
	pod.Spec.Volumes = []v1.Volume{{Name: "host-etc-hosts"}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "host-etc-hosts", MountPath: "/etc/hosts-original"},
		{Name: "host-etc-hosts", MountPath: "/etc/hosts"},
	}
	pod.Spec.Containers[1].VolumeMounts = []v1.VolumeMount{{Name: "host-etc-hosts", MountPath: "/etc/hosts-original"}}
	h.sync(pod)
	own := h.rec.config("own").GetMounts()
	if len(own) != 2 || own[1].GetHostPath() != hostsDir {
		t.Errorf("own: mounts %v, want only its two volume mounts", own)
	}
	if m := hostsMountOf(h.rec.config("other")); m == nil || strings.HasPrefix(m.GetHostPath(), hostsDir) {
		t.Errorf("other: /etc/hosts mount %v, want the pod's hosts file", m)
	}
}

func TestEtcHostsNeedsAPodIP(t *testing.T) {
	// A runtime that gives the sandbox no IP (networking left to the
	// agent, not set up): the kubelet mounts no hosts file then.
	h, podsDir, _ := hostsHarness(t, func(c *cri.Config) { c.RuntimeService = noIPs{c.RuntimeService} })
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	h.sync(pod)
	if m := hostsMountOf(h.rec.config("app")); m != nil {
		t.Errorf("/etc/hosts mount %v for a pod without an IP, want none", m)
	}
	if _, err := os.Stat(filepath.Join(podsDir, string(pod.UID), "etc-hosts")); !os.IsNotExist(err) {
		t.Errorf("hosts file: %v, want none written", err)
	}
}

func TestEtcHostsIsRewrittenInPlace(t *testing.T) {
	// A container that runs has the file bind-mounted: the runtime writes
	// the same inode, so it sees the new content.
	h, podsDir, _ := hostsHarness(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	dir := filepath.Join(podsDir, string(pod.UID))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "etc-hosts")
	if err := os.WriteFile(path, []byte("stale content of an earlier sandbox, longer than the new one will be ........................................................................................................................................................................................................\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "same-inode")
	if err := os.Link(path, link); err != nil {
		t.Fatal(err)
	}
	h.sync(pod)
	got, err := os.ReadFile(link)
	if err != nil {
		t.Fatal(err)
	}
	if want := localhostLines + h.podIP(t, pod) + "\tp\n"; string(got) != want {
		t.Errorf("the file's inode holds %q, want %q", got, want)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("hosts file mode %v (%v), want 0644", st.Mode(), err)
	}
}

func TestEtcHostsRefusesAHostnameThatIsNotValid(t *testing.T) {
	// The API server refuses such pods; a source that does not validate
	// gets a clear error naming the pod and the field.
	for _, tc := range []struct {
		name, field string
		edit        func(*v1.Pod)
	}{
		{"hostname", "spec.hostname", func(p *v1.Pod) { p.Spec.Hostname = "Not_A_Label" }},
		{"subdomain", "spec.subdomain", func(p *v1.Pod) { p.Spec.Subdomain = "a.b" }},
		{"hostnameOverride", "spec.hostnameOverride", func(p *v1.Pod) { p.Spec.HostnameOverride = ptr.To("Not-RFC1123") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, _ := hostsHarness(t)
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			tc.edit(pod)
			err := h.rt.SyncPod(h.ctx, pod, h.status(pod)).Error()
			if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "ns/p") {
				t.Errorf("SyncPod error %v, want one naming the pod and %s", err, tc.field)
			}
		})
	}
}

func TestSandboxHostnameAsFQDN(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*v1.Pod)
		want    string
		wantErr string
	}{
		{"with a subdomain", func(p *v1.Pod) { p.Spec.Subdomain = "svc1" }, "p.svc1.ns.svc.cluster.local", ""},
		{"without a subdomain the short name", func(*v1.Pod) {}, "p", ""},
		{"longer than 64 characters", func(p *v1.Pod) {
			p.Spec.Subdomain, p.Spec.Hostname = "svc1", strings.Repeat("h", 40)
		}, "", "spec.setHostnameAsFQDN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, _ := hostsHarness(t)
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.SetHostnameAsFQDN = ptr.To(true)
			tc.edit(pod)
			err := h.rt.SyncPod(h.ctx, pod, h.status(pod)).Error()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("SyncPod error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := h.lastSandbox().GetHostname(); got != tc.want {
				t.Errorf("sandbox hostname %q, want %q", got, tc.want)
			}
		})
	}
}

// noIPs is a runtime whose sandboxes report no IP.
type noIPs struct{ criapi.RuntimeService }

func (n noIPs) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	resp, err := n.RuntimeService.PodSandboxStatus(ctx, id, verbose)
	if resp.GetStatus() != nil {
		resp.Status.Network = &runtimeapi.PodSandboxNetworkStatus{}
	}
	return resp, err
}
