package network_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/network"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// sandboxNetwork plugs a network.Network into fakecri's hook, as a
// runtime that leaves pod networking to the agent would call it.
type sandboxNetwork struct{ n network.Network }

func (s sandboxNetwork) ref(sb fakecri.SandboxNetwork) network.PodRef {
	return network.PodRef{Namespace: sb.Namespace, Name: sb.Name, UID: sb.UID, SandboxID: sb.ID}
}

func (s sandboxNetwork) options(sb fakecri.SandboxNetwork) network.Options {
	var o network.Options
	for _, pm := range sb.PortMappings {
		o.PortMappings = append(o.PortMappings, network.PortMapping{
			HostPort: pm.GetHostPort(), ContainerPort: pm.GetContainerPort(), Protocol: pm.GetProtocol().String(), HostIP: pm.GetHostIp(),
		})
	}
	if d := sb.DNS; d != nil {
		o.DNS = &network.DNS{Servers: d.GetServers(), Searches: d.GetSearches(), Options: d.GetOptions()}
	}
	return o
}

func (s sandboxNetwork) SetUpSandbox(ctx context.Context, sb fakecri.SandboxNetwork) ([]netip.Addr, error) {
	return s.n.SetUp(ctx, s.ref(sb), sb.NetNS, s.options(sb))
}

func (s sandboxNetwork) TearDownSandbox(ctx context.Context, sb fakecri.SandboxNetwork) error {
	return s.n.TearDown(ctx, s.ref(sb), sb.NetNS, s.options(sb))
}

func TestRealPluginsThroughFakeCRISandboxes(t *testing.T) {
	e := newBridgeEnv(t)
	netnsDir := t.TempDir()
	rt, err := fakecri.New(fakecri.Config{Network: sandboxNetwork{e.new(t)}, NetNSDir: netnsDir})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostPort := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-web"},
		PortMappings: []*runtimeapi.PortMapping{{HostPort: int32(hostPort), ContainerPort: 8080}},
	}
	ctx := t.Context()
	id, err := rt.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemovePodSandbox(context.Background(), id) })
	st, err := rt.PodSandboxStatus(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	ip, err := netip.ParseAddr(st.GetStatus().GetNetwork().GetIp())
	if err != nil || !e.subnet.Contains(ip) {
		t.Fatalf("sandbox IP %q, want one in %s", st.GetStatus().GetNetwork().GetIp(), e.subnet)
	}
	ents, _ := os.ReadDir(netnsDir)
	if len(ents) != 1 {
		t.Fatalf("namespaces in %s: %v, want the sandbox's", netnsDir, ents)
	}
	ns := filepath.Join(netnsDir, ents[0].Name())
	// The pod's server, reached from the host through the port mapping.
	echoServer(t, ns, ":8080", "fake pod")
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(hostPort))
	if got := readFrom(t, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 10*time.Second) }); got != "fake pod" {
		t.Errorf("%s answered %q, want the sandbox's server", addr, got)
	}
	lease := filepath.Join(e.ipam, e.name, ip.String())
	if _, err := os.Stat(lease); err != nil {
		t.Fatalf("no lease for %s: %v", ip, err)
	}
	if err := rt.StopPodSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lease); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lease for %s is still there after StopPodSandbox: %v", ip, err)
	}
	if _, err := os.Stat(ns); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the namespace is still there after StopPodSandbox: %v", err)
	}
	if err := rt.RemovePodSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	// A sandbox whose set-up fails (the bridge configuration is gone)
	// is not created.
	if err := os.Remove(filepath.Join(e.conf, "10-bridge.conflist")); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RunPodSandbox(ctx, cfg, ""); err == nil || !strings.Contains(err.Error(), "no usable CNI network configuration") {
		t.Errorf("RunPodSandbox without a configuration = %v, want the network's error", err)
	}
}
