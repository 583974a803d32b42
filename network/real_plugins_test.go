package network_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/network"
)

// These tests run Debian's containernetworking-plugins (bridge,
// host-local, portmap, loopback) in network namespaces and on a bridge
// that each test creates and deletes itself, on a random 10.250.x.0/24
// subnet without masquerade or default route: traffic stays between the
// test's namespaces and the host. They need root and the plugins;
// without them they skip, unless NODEKIT_NETWORK_REQUIRED is set (make
// test sets it after installing the plugins), and then they fail.

// pluginDir is where Debian installs the plugins; NODEKIT_CNI_BIN_DIR
// overrides it.
func pluginDir() string {
	if d := os.Getenv("NODEKIT_CNI_BIN_DIR"); d != "" {
		return d
	}
	return "/usr/lib/cni"
}

func requireRealPlugins(t testing.TB) string {
	t.Helper()
	skip := testenv.Network.Missing(t)
	if os.Geteuid() != 0 {
		skip("needs root to create network namespaces and a bridge (run make test as root)")
	}
	dir := pluginDir()
	for _, p := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			skip("CNI plugin %s is missing in %s (hack/network/install.sh installs Debian's containernetworking-plugins): %v", p, dir, err)
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skip("needs ip from iproute2: %v", err)
	}
	return dir
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newNetns creates a network namespace deleted when the test ends and
// returns its path.
func newNetns(t testing.TB) string {
	t.Helper()
	name := "nkt-" + randomHex(t, 5)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", name).Run() })
	return "/run/netns/" + name
}

// inNetns runs fn on an OS thread moved into the namespace at path, so
// sockets fn opens belong to it.
func inNetns(t *testing.T, path string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer unix.Close(orig)
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer func() {
		// A thread that cannot go back stays locked and dies with the
		// goroutine.
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
	}()
	fn()
}

// bridgeEnv is a bridge conflist on a random subnet with its own
// host-local store and libcni cache.
type bridgeEnv struct {
	conf, ipam, cache, bin string
	name, bridge           string
	subnet                 netip.Prefix
}

func newBridgeEnv(t testing.TB) bridgeEnv {
	t.Helper()
	bin := requireRealPlugins(t)
	d := t.TempDir()
	x := make([]byte, 1)
	_, _ = rand.Read(x)
	e := bridgeEnv{
		conf: filepath.Join(d, "net.d"), ipam: filepath.Join(d, "ipam"), cache: filepath.Join(d, "cache"), bin: bin,
		name:   "nkt-" + randomHex(t, 4),
		bridge: "nkb" + randomHex(t, 4),
		subnet: netip.MustParsePrefix(fmt.Sprintf("10.250.%d.0/24", 1+int(x[0])%250)),
	}
	writeFile(t, filepath.Join(e.conf, "10-bridge.conflist"), fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "isDefaultGateway": false, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}`, e.name, e.bridge, e.subnet, e.ipam), 0o644)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", e.bridge).Run() })
	return e
}

func (e bridgeEnv) new(t testing.TB) *network.CNI {
	t.Helper()
	n, err := network.New(network.Config{ConfDir: e.conf, BinDirs: []string{e.bin}, CacheDir: e.cache, Loopback: true, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// setUp sets a new namespace up as a pod's and tears it down when the
// test ends (before the namespace is deleted).
func (e bridgeEnv) setUp(t *testing.T, n *network.CNI, name string, opts network.Options) (network.PodRef, string, netip.Addr) {
	t.Helper()
	ns := newNetns(t)
	ref := network.PodRef{Namespace: "test", Name: name, UID: "uid-" + name, SandboxID: "sb-" + randomHex(t, 8)}
	ips, err := n.SetUp(t.Context(), ref, ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.TearDown(context.Background(), ref, ns, network.Options{}) })
	ip, ok := ips.V4()
	if !ok || !e.subnet.Contains(ip) {
		t.Fatalf("SetUp gave %v, want an IPv4 address in %s", ips, e.subnet)
	}
	return ref, ns, ip
}

// echoServer listens on addr inside the namespace ns and answers each
// connection with its own name, until the test ends.
func echoServer(t *testing.T, ns, addr, reply string) net.Addr {
	t.Helper()
	var l net.Listener
	inNetns(t, ns, func() {
		var err error
		if l, err = net.Listen("tcp", addr); err != nil {
			t.Fatal(err)
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, reply)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return l.Addr()
}

func readFrom(t *testing.T, dial func() (net.Conn, error)) string {
	t.Helper()
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRealPluginsPodsReachEachOther(t *testing.T) {
	e := newBridgeEnv(t)
	n := e.new(t)
	_, nsA, ipA := e.setUp(t, n, "a", network.Options{})
	_, nsB, ipB := e.setUp(t, n, "b", network.Options{})
	if ipA == ipB {
		t.Fatalf("both pods got %s", ipA)
	}
	echoServer(t, nsB, netip.AddrPortFrom(ipB, 8080).String(), "pod b")
	var got string
	inNetns(t, nsA, func() {
		got = readFrom(t, func() (net.Conn, error) {
			return net.DialTimeout("tcp", netip.AddrPortFrom(ipB, 8080).String(), 10*time.Second)
		})
	})
	if got != "pod b" {
		t.Errorf("pod a read %q from pod b, want %q", got, "pod b")
	}
	// Config.Loopback brought lo up: a pod reaches itself on 127.0.0.1.
	lo := echoServer(t, nsA, "127.0.0.1:0", "pod a lo")
	inNetns(t, nsA, func() {
		got = readFrom(t, func() (net.Conn, error) { return net.DialTimeout("tcp", lo.String(), 10*time.Second) })
	})
	if got != "pod a lo" {
		t.Errorf("pod a read %q on its loopback", got)
	}
}

func TestRealPluginsPortMapping(t *testing.T) {
	e := newBridgeEnv(t)
	n := e.new(t)
	// A host port nobody uses now.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostPort := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	_, ns, _ := e.setUp(t, n, "web", network.Options{PortMappings: []network.PortMapping{{HostPort: int32(hostPort), ContainerPort: 8080}}})
	echoServer(t, ns, ":8080", "web")
	gateway := e.subnet.Addr().Next() // the bridge's address, a local one
	for _, host := range []string{gateway.String(), "127.0.0.1"} {
		addr := net.JoinHostPort(host, fmt.Sprint(hostPort))
		got := readFrom(t, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 10*time.Second) })
		if got != "web" {
			t.Errorf("%s answered %q, want the pod's %q", addr, got, "web")
		}
	}
}

func TestRealPluginsTearDownAfterRestartReleasesTheIP(t *testing.T) {
	e := newBridgeEnv(t)
	ns := newNetns(t)
	ref := network.PodRef{Namespace: "test", Name: "restart", UID: "uid-r", SandboxID: "sb-" + randomHex(t, 8)}
	ips, err := e.new(t).SetUp(t.Context(), ref, ns, network.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ip, _ := ips.V4()
	lease := filepath.Join(e.ipam, e.name, ip.String())
	if _, err := os.Stat(lease); err != nil {
		t.Fatalf("host-local holds no lease for %s: %v", ip, err)
	}
	if err := e.new(t).Check(t.Context(), ref, ns, network.Options{}); err != nil {
		t.Errorf("Check after SetUp = %v", err)
	}
	// A new network object, as after a restart, with the same cache dir;
	// the configuration directory is empty by now.
	if err := os.Remove(filepath.Join(e.conf, "10-bridge.conflist")); err != nil {
		t.Fatal(err)
	}
	if err := e.new(t).TearDown(t.Context(), ref, ns, network.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lease); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lease for %s is still there after TearDown: %v", ip, err)
	}
	out := run(t, "ip", "-n", filepath.Base(ns), "-o", "link", "show")
	if strings.Contains(out, "eth0") {
		t.Errorf("eth0 is still in the namespace after TearDown: %s", out)
	}
	// Twice is fine.
	if err := e.new(t).TearDown(t.Context(), ref, ns, network.Options{}); err != nil {
		t.Errorf("second TearDown = %v", err)
	}
}

func TestRealPluginsCheckFindsAMissingInterface(t *testing.T) {
	e := newBridgeEnv(t)
	n := e.new(t)
	ref, ns, _ := e.setUp(t, n, "check", network.Options{})
	if err := n.Check(t.Context(), ref, ns, network.Options{}); err != nil {
		t.Fatalf("Check = %v", err)
	}
	run(t, "ip", "-n", filepath.Base(ns), "link", "delete", "eth0")
	err := n.Check(t.Context(), ref, ns, network.Options{})
	if err == nil || !strings.Contains(err.Error(), `"test/check"`) {
		t.Fatalf("Check without eth0 = %v, want an error naming the pod", err)
	}
}

func TestRealPluginsDualStack(t *testing.T) {
	e := newBridgeEnv(t)
	v6 := netip.MustParsePrefix("fd00:250:" + randomHex(t, 2) + "::/64")
	writeFile(t, filepath.Join(e.conf, "10-bridge.conflist"), fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}], [{"subnet": %q}]], "dataDir": %q}}
  ]
}`, e.name, e.bridge, e.subnet, v6, e.ipam), 0o644)
	n := e.new(t)
	ns := newNetns(t)
	ref := network.PodRef{Namespace: "test", Name: "dual", UID: "uid-dual", SandboxID: "sb-" + randomHex(t, 8)}
	ips, err := n.SetUp(t.Context(), ref, ns, network.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.TearDown(context.Background(), ref, ns, network.Options{}) })
	v4ip, ok4 := ips.V4()
	v6ip, ok6 := ips.V6()
	if !ok4 || !e.subnet.Contains(v4ip) || !ok6 || !v6.Contains(v6ip) || len(ips) != 2 {
		t.Fatalf("SetUp gave %v, want one address in %s and one in %s", ips, e.subnet, v6)
	}
}
