package fakecri_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// recordingNetwork is a fakecri.Network that records its calls and
// checks that it is handed a real network namespace.
type recordingNetwork struct {
	mu       sync.Mutex
	setUps   []fakecri.SandboxNetwork
	tearDown []fakecri.SandboxNetwork
	err      error
	notNetns []string
}

func isNetns(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

func (n *recordingNetwork) SetUpSandbox(_ context.Context, sb fakecri.SandboxNetwork) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setUps = append(n.setUps, sb)
	if !isNetns(sb.NetNS) {
		n.notNetns = append(n.notNetns, sb.NetNS)
	}
	if n.err != nil {
		return nil, n.err
	}
	return []netip.Addr{netip.MustParseAddr("10.250.9.7"), netip.MustParseAddr("fd00:250::7")}, nil
}

func (n *recordingNetwork) TearDownSandbox(_ context.Context, sb fakecri.SandboxNetwork) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.tearDown = append(n.tearDown, sb)
	return nil
}

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.Network.Root(t, "creating network namespaces")
}

func TestNetworkHookGetsARealNamespacePerSandbox(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	nw := &recordingNetwork{}
	rt, err := fakecri.New(fakecri.Config{Network: nw, NetNSDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"},
		PortMappings: []*runtimeapi.PortMapping{{HostPort: 8080, ContainerPort: 80}},
	}
	id, err := rt.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemovePodSandbox(context.Background(), id) })
	if len(nw.setUps) != 1 || len(nw.notNetns) != 0 {
		t.Fatalf("SetUpSandbox calls %+v, not namespaces %v; want one with a network namespace", nw.setUps, nw.notNetns)
	}
	got := nw.setUps[0]
	if got.ID != id || got.Namespace != "default" || got.Name != "web" || got.UID != "uid-1" || len(got.PortMappings) != 1 || filepath.Dir(got.NetNS) != dir {
		t.Errorf("SetUpSandbox got %+v", got)
	}
	st, err := rt.PodSandboxStatus(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.GetStatus().GetNetwork(); n.GetIp() != "10.250.9.7" || len(n.GetAdditionalIps()) != 1 || n.GetAdditionalIps()[0].GetIp() != "fd00:250::7" {
		t.Errorf("sandbox network status = %v, want the network's IPs", n)
	}
	if err := rt.StopPodSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	if len(nw.tearDown) != 1 || nw.tearDown[0].NetNS != got.NetNS {
		t.Errorf("TearDownSandbox calls %+v, want one for %s", nw.tearDown, got.NetNS)
	}
	if _, err := os.Stat(got.NetNS); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the namespace %s is still there after StopPodSandbox: %v", got.NetNS, err)
	}
	if err := rt.StopPodSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemovePodSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	if len(nw.tearDown) != 1 {
		t.Errorf("TearDownSandbox ran %d times, want once", len(nw.tearDown))
	}
	// A host-network sandbox gets no namespace and no call.
	hostCfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "host", Namespace: "default", Uid: "uid-2"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}},
	}
	if _, err := rt.RunPodSandbox(ctx, hostCfg, ""); err != nil {
		t.Fatal(err)
	}
	if len(nw.setUps) != 1 {
		t.Errorf("a host-network sandbox was set up: %+v", nw.setUps)
	}
}

func TestNetworkHookFailureFailsTheSandbox(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	nw := &recordingNetwork{err: errors.New("no more addresses")}
	rt, err := fakecri.New(fakecri.Config{Network: nw, NetNSDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"}}
	if _, err := rt.RunPodSandbox(t.Context(), cfg, ""); err == nil || !strings.Contains(err.Error(), "no more addresses") {
		t.Fatalf("RunPodSandbox = %v, want the network's error", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the failed sandbox's namespace was left: %v", ents)
	}
	if l, _ := rt.ListPodSandbox(t.Context(), nil); len(l) != 0 {
		t.Errorf("the failed sandbox is listed: %v", l)
	}
	nw.mu.Lock()
	nw.err = nil
	nw.mu.Unlock()
	id, err := rt.RunPodSandbox(t.Context(), cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox with the same name after a failure = %v", err)
	}
	if err := rt.RemovePodSandbox(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("RemovePodSandbox left the namespace: %v", ents)
	}
}

func TestNetNSDirMustBeAbsolute(t *testing.T) {
	if _, err := fakecri.New(fakecri.Config{Network: &recordingNetwork{}, NetNSDir: "netns"}); err == nil || !strings.Contains(err.Error(), "Config.NetNSDir") {
		t.Errorf("New = %v, want an error naming Config.NetNSDir", err)
	}
}
