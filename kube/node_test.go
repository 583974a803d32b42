package kube

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func getNode(t *testing.T, f *fixture) *v1.Node {
	t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func condition(t *testing.T, node *v1.Node, typ v1.NodeConditionType) v1.NodeCondition {
	t.Helper()
	c := findCondition(node.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("node has no %s condition: %+v", typ, node.Status.Conditions)
	}
	return *c
}

// TestRegisterCreates checks the Node created at registration: labels,
// taints, addresses, capacity with the reservation subtracted, nodeInfo
// with the runtime's version, the daemon port and the conditions.
func TestRegisterCreates(t *testing.T) {
	f := newFixture()
	f.cfg.NodeIPs = []net.IP{net.ParseIP("192.0.2.10"), net.ParseIP("192.0.2.11")}
	f.cfg.DaemonPort = 10260
	n := f.node(t)
	if err := n.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	node := getNode(t, f)
	wantLabels := map[string]string{
		"example.com/role":       "edge",
		"kubernetes.io/hostname": "host-1",
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
	}
	if d := cmp.Diff(wantLabels, node.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if d := cmp.Diff(f.cfg.Taints, node.Spec.Taints); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	wantAddrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}, {Type: v1.NodeInternalIP, Address: "192.0.2.11"}, {Type: v1.NodeHostName, Address: "host-1"}}
	if d := cmp.Diff(wantAddrs, node.Status.Addresses); d != "" {
		t.Errorf("addresses (-want +got):\n%s", d)
	}
	for name, want := range map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "ephemeral-storage": "100Gi", "pods": "110"} {
		if q := node.Status.Capacity[name]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("capacity %s = %s, want %s", name, q.String(), want)
		}
	}
	for name, want := range map[v1.ResourceName]string{"cpu": "3500m", "memory": "7Gi", "ephemeral-storage": "100Gi", "pods": "110"} {
		if q := node.Status.Allocatable[name]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, q.String(), want)
		}
	}
	info := node.Status.NodeInfo
	if info.KubeletVersion != DefaultKubeletVersion || info.ContainerRuntimeVersion != "fakecri://1.2.3" || info.KernelVersion != "6.1.0" || info.OSImage != "Test OS" || info.BootID != "boot" || info.MachineID != "machine" {
		t.Errorf("nodeInfo = %+v", info)
	}
	if p := node.Status.DaemonEndpoints.KubeletEndpoint.Port; p != 10260 {
		t.Errorf("daemon port = %d, want 10260", p)
	}
	for typ, want := range map[v1.NodeConditionType]v1.ConditionStatus{v1.NodeReady: v1.ConditionTrue, v1.NodeMemoryPressure: v1.ConditionFalse, v1.NodeDiskPressure: v1.ConditionFalse, v1.NodePIDPressure: v1.ConditionFalse} {
		if c := condition(t, node, typ); c.Status != want || !c.LastHeartbeatTime.Time.Equal(t0) {
			t.Errorf("condition %s = %+v, want %s at %v", typ, c, want, t0)
		}
	}
	if n.nodeUID() != node.UID {
		t.Errorf("uid = %q, want %q", n.nodeUID(), node.UID)
	}
}

// TestRegisterAdopts checks that an existing Node is adopted: its labels
// merged with ours (ours win, the others stay), its taints untouched.
func TestRegisterAdopts(t *testing.T) {
	existing := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "existing-uid", Labels: map[string]string{
			"admin.example.com/keep": "yes",
			"example.com/role":       "core",
			"kubernetes.io/hostname": "old",
		}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "admin", Effect: v1.TaintEffectNoExecute}}},
	}
	f := newFixture(existing)
	n := f.node(t)
	if err := n.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	node := getNode(t, f)
	want := map[string]string{
		"admin.example.com/keep": "yes",
		"example.com/role":       "edge",
		"kubernetes.io/hostname": "host-1",
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
	}
	if d := cmp.Diff(want, node.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if d := cmp.Diff(existing.Spec.Taints, node.Spec.Taints); d != "" {
		t.Errorf("taints of an adopted node changed (-want +got):\n%s", d)
	}
	if n.nodeUID() != "existing-uid" {
		t.Errorf("uid = %q, want the existing node's", n.nodeUID())
	}

	// Adopting again with nothing to change sends no patch.
	before := f.count("patch", "nodes", "")
	if err := n.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.count("patch", "nodes", ""); got != before {
		t.Errorf("a second adoption sent %d patches, want none", got-before)
	}
}

// TestRegisterError names the node and keeps the API error.
func TestRegisterError(t *testing.T) {
	f := newFixture()
	f.failN("create", "nodes", 1, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1", errBoom))
	err := f.node(t).register(context.Background())
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "n1") {
		t.Fatalf("register = %v; want a Forbidden error naming n1", err)
	}
}

// TestStatusReportFrequency checks when the status is patched: at the
// first sync, not again while nothing changes until the report frequency
// has passed, at once when health changes, with lastTransitionTime kept
// for unchanged conditions.
func TestStatusReportFrequency(t *testing.T) {
	f := newFixture()
	n := f.node(t)
	ctx := context.Background()
	if err := n.register(ctx); err != nil {
		t.Fatal(err)
	}
	patches := func() int { return f.count("patch", "nodes", "status") }
	sync := func() {
		t.Helper()
		if err := n.syncStatus(ctx); err != nil {
			t.Fatal(err)
		}
	}

	sync()
	if patches() != 1 {
		t.Fatalf("first sync: %d status patches, want 1", patches())
	}
	f.clock.Step(10 * time.Second)
	sync()
	f.clock.Step(4*time.Minute + 49*time.Second)
	sync()
	if patches() != 1 {
		t.Fatalf("unchanged status within 5m: %d status patches, want 1", patches())
	}
	f.clock.Step(time.Second) // 5m since the first report
	sync()
	if patches() != 2 {
		t.Fatalf("unchanged status after 5m: %d status patches, want 2", patches())
	}
	node := getNode(t, f)
	ready := condition(t, node, v1.NodeReady)
	if !ready.LastHeartbeatTime.Time.Equal(t0.Add(5*time.Minute)) || !ready.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("Ready after the periodic report = %+v; want heartbeat t0+5m, transition t0", ready)
	}

	f.clock.Step(10 * time.Second)
	f.health.set(errBoom)
	sync()
	if patches() != 3 {
		t.Fatalf("health changed: %d status patches, want 3", patches())
	}
	node = getNode(t, f)
	ready = condition(t, node, v1.NodeReady)
	now := t0.Add(5*time.Minute + 10*time.Second)
	if ready.Status != v1.ConditionFalse || ready.Reason != "KubeletNotReady" || ready.Message != "boom" || !ready.LastTransitionTime.Time.Equal(now) {
		t.Fatalf("Ready after a health error = %+v; want False, KubeletNotReady, boom, transition %v", ready, now)
	}
	if mem := condition(t, node, v1.NodeMemoryPressure); !mem.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("MemoryPressure transition moved: %+v", mem)
	}
}

// TestStatusPressureAndOthersConditions checks the pressure conditions and
// that a condition set by someone else is kept.
func TestStatusPressureAndOthersConditions(t *testing.T) {
	f := newFixture()
	var p Pressure
	f.cfg.Conditions = ConditionsFunc(func() Pressure { return p })
	n := f.node(t)
	ctx := context.Background()
	if err := n.register(ctx); err != nil {
		t.Fatal(err)
	}
	node := getNode(t, f)
	node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, Reason: "RouteCreated"})
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = Pressure{Memory: true, Disk: true, PID: true}
	if err := n.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	node = getNode(t, f)
	for typ, reason := range map[v1.NodeConditionType]string{
		v1.NodeMemoryPressure: "KubeletHasInsufficientMemory",
		v1.NodeDiskPressure:   "KubeletHasDiskPressure",
		v1.NodePIDPressure:    "KubeletHasInsufficientPID",
	} {
		if c := condition(t, node, typ); c.Status != v1.ConditionTrue || c.Reason != reason {
			t.Errorf("%s = %+v; want True, %s", typ, c, reason)
		}
	}
	if c := condition(t, node, v1.NodeNetworkUnavailable); c.Reason != "RouteCreated" {
		t.Errorf("NetworkUnavailable set by another writer was changed: %+v", c)
	}
}

// TestStatusRetry checks that a failed patch is retried within the sync,
// reading the Node from the API server's cache first and then from etcd.
func TestStatusRetry(t *testing.T) {
	f := newFixture()
	n := f.node(t)
	ctx := context.Background()
	if err := n.register(ctx); err != nil {
		t.Fatal(err)
	}
	f.failN("patch", "nodes", 2, apierrors.NewServiceUnavailable("down"))
	f.client.ClearActions()
	if err := n.syncStatus(ctx); err != nil {
		t.Fatalf("sync with two failed patches = %v; want success on the third try", err)
	}
	var rvs []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "nodes" {
			rvs = append(rvs, a.(interface{ GetGetOptions() metav1.GetOptions }).GetGetOptions().ResourceVersion)
		}
	}
	if d := cmp.Diff([]string{"0", "", ""}, rvs); d != "" {
		t.Fatalf("resourceVersions of the node reads (-want +got):\n%s", d)
	}

	f.failN("patch", "nodes", statusUpdateRetries, apierrors.NewServiceUnavailable("down"))
	f.clock.Step(5 * time.Minute)
	if err := n.syncStatus(ctx); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("sync with every patch failing = %v; want ServiceUnavailable", err)
	}
}

// TestStatusReRegisters checks that a Node deleted while running is
// created again by the next status sync.
func TestStatusReRegisters(t *testing.T) {
	f := newFixture()
	n := f.node(t)
	ctx := context.Background()
	if err := n.register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if node := getNode(t, f); node.Labels[v1.LabelHostname] != "host-1" {
		t.Fatalf("re-registered node labels = %v", node.Labels)
	}
}

// TestRuntimeVersionKept checks that a failing runtime Version call keeps
// the last version reported.
func TestRuntimeVersionKept(t *testing.T) {
	f := newFixture()
	n := f.node(t)
	ctx := context.Background()
	if err := n.register(ctx); err != nil {
		t.Fatal(err)
	}
	f.rt.mu.Lock()
	f.rt.err = errBoom
	f.rt.mu.Unlock()
	f.clock.Step(5 * time.Minute)
	if err := n.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if v := getNode(t, f).Status.NodeInfo.ContainerRuntimeVersion; v != "fakecri://1.2.3" {
		t.Fatalf("containerRuntimeVersion = %q after a failed Version call; want the last one", v)
	}
}

// TestStatusAddressesReplaced checks that changing the node IPs replaces
// the address list (a strategic merge on type would keep one InternalIP).
func TestStatusAddressesReplaced(t *testing.T) {
	f := newFixture()
	f.cfg.NodeIPs = []net.IP{net.ParseIP("192.0.2.10")}
	ctx := context.Background()
	if err := f.node(t).register(ctx); err != nil {
		t.Fatal(err)
	}
	f.cfg.NodeIPs = []net.IP{net.ParseIP("192.0.2.20"), net.ParseIP("192.0.2.21")}
	n := f.node(t)
	if err := n.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.20"}, {Type: v1.NodeInternalIP, Address: "192.0.2.21"}, {Type: v1.NodeHostName, Address: "host-1"}}
	if d := cmp.Diff(want, getNode(t, f).Status.Addresses); d != "" {
		t.Fatalf("addresses (-want +got):\n%s", d)
	}
}

// TestDeclaredFeatures checks status.declaredFeatures, which the
// scheduler matches against what a pod needs: by default the features
// nodekit implements (a pod with a RestartAllContainers rule is placed
// only on a node that declares RestartAllContainersOnContainerExits);
// the configured ones sorted and without duplicates; none when the
// configuration says none, also on a Node that declared some before.
func TestDeclaredFeatures(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  []string
		want []string
	}{
		{"default", nil, []string{"InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers", "RestartAllContainersOnContainerExits"}},
		{"configured", []string{"Zed", "RestartAllContainersOnContainerExits", "Zed"}, []string{"RestartAllContainersOnContainerExits", "Zed"}},
		{"none", []string{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{DeclaredFeatures: []string{"Old"}}})
			f.cfg.DeclaredFeatures = tc.cfg
			n := f.node(t)
			if err := n.syncStatus(context.Background()); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, getNode(t, f).Status.DeclaredFeatures); d != "" {
				t.Errorf("declaredFeatures (-want +got):\n%s", d)
			}
		})
	}
}
