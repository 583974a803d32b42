package network_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodekit/nodekit/network"
)

// recordPlugin is a CNI plugin written in sh: it saves its standard
// input and CNI_ARGS to $DIR/<command>.json and .args, and answers ADD
// with one address on a sandboxed interface and one on a host-side one.
const recordPlugin = `#!/bin/sh
dir=$(dirname "$0")/rec
mkdir -p "$dir"
cat >"$dir/$CNI_COMMAND.json"
echo "$CNI_ARGS" >"$dir/$CNI_COMMAND.args"
case "$CNI_COMMAND" in
ADD) echo '{"cniVersion":"1.0.0","interfaces":[{"name":"br0"},{"name":"eth0","sandbox":"'"$CNI_NETNS"'"}],"ips":[{"interface":0,"address":"10.250.0.1/24"},{"interface":1,"address":"10.250.0.7/24"},{"interface":1,"address":"fd00:250::7/64"}]}' ;;
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
esac
`

func writeFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// scriptEnv is a configuration dir, a bin dir with the record plugin as
// "nk-record" and a cache dir.
type scriptEnv struct {
	conf, bin, cache string
}

func newScriptEnv(t testing.TB) scriptEnv {
	t.Helper()
	d := t.TempDir()
	e := scriptEnv{conf: filepath.Join(d, "net.d"), bin: filepath.Join(d, "bin"), cache: filepath.Join(d, "cache")}
	writeFile(t, filepath.Join(e.bin, "nk-record"), recordPlugin, 0o755)
	if err := os.MkdirAll(e.conf, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e scriptEnv) recorded(t *testing.T, cmd string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.bin, "rec", cmd+".json"))
	if err != nil {
		t.Fatalf("the plugin did not run %s: %v", cmd, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s stdin: %v", cmd, err)
	}
	return m
}

func (e scriptEnv) new(t *testing.T, timeout time.Duration) *network.CNI {
	t.Helper()
	n, err := network.New(network.Config{ConfDir: e.conf, BinDirs: []string{e.bin}, CacheDir: e.cache, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const recordConflist = `{"cniVersion":"1.0.0","name":"rec","plugins":[{"type":"nk-record","capabilities":{"portMappings":true,"bandwidth":true,"ipRanges":true,"dns":true}}]}`

var pod = network.PodRef{Namespace: "ns1", Name: "web", UID: "uid-1", SandboxID: "sandbox1"}

func TestSetUpPassesCapabilitiesAndReturnsPodIPs(t *testing.T) {
	e := newScriptEnv(t)
	writeFile(t, filepath.Join(e.conf, "10-rec.conflist"), recordConflist, 0o644)
	n := e.new(t, 0)
	opts := network.Options{
		PortMappings: []network.PortMapping{{HostPort: 8080, ContainerPort: 80}, {HostPort: 5353, ContainerPort: 53, Protocol: "UDP", HostIP: "127.0.0.1"}},
		Bandwidth:    &network.Bandwidth{IngressRate: 1000, IngressBurst: 2000, EgressRate: 3000, EgressBurst: 4000},
		IPRanges:     [][]network.IPRange{{{Subnet: "10.250.0.0/24", Gateway: "10.250.0.1"}}},
		DNS:          &network.DNS{Servers: []string{"10.0.0.10"}, Searches: []string{"svc.local"}, Options: []string{"ndots:5"}},
	}
	ips, err := n.SetUp(context.Background(), pod, "/var/run/netns/x", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := "[10.250.0.7 fd00:250::7]"
	if got := fmtIPs(ips); got != want {
		t.Errorf("IPs = %v, want %s (the bridge's address left out)", ips, want)
	}
	if v4, ok := ips.V4(); !ok || v4.String() != "10.250.0.7" {
		t.Errorf("V4() = %v %v", v4, ok)
	}
	if v6, ok := ips.V6(); !ok || v6.String() != "fd00:250::7" {
		t.Errorf("V6() = %v %v", v6, ok)
	}
	rc := e.recorded(t, "ADD")["runtimeConfig"]
	wantRC := map[string]any{
		"portMappings": []any{
			map[string]any{"hostPort": 8080.0, "containerPort": 80.0, "protocol": "tcp"},
			map[string]any{"hostPort": 5353.0, "containerPort": 53.0, "protocol": "udp", "hostIP": "127.0.0.1"},
		},
		"bandwidth": map[string]any{"ingressRate": 1000.0, "ingressBurst": 2000.0, "egressRate": 3000.0, "egressBurst": 4000.0},
		"ipRanges":  []any{[]any{map[string]any{"subnet": "10.250.0.0/24", "gateway": "10.250.0.1"}}},
		"dns":       map[string]any{"servers": []any{"10.0.0.10"}, "searches": []any{"svc.local"}, "options": []any{"ndots:5"}},
	}
	if diff := cmp.Diff(wantRC, rc); diff != "" {
		t.Errorf("runtimeConfig (-want +got):\n%s", diff)
	}
	args, _ := os.ReadFile(filepath.Join(e.bin, "rec", "ADD.args"))
	for _, kv := range []string{"K8S_POD_NAMESPACE=ns1", "K8S_POD_NAME=web", "K8S_POD_UID=uid-1", "K8S_POD_INFRA_CONTAINER_ID=sandbox1", "IgnoreUnknown=1"} {
		if !strings.Contains(string(args), kv) {
			t.Errorf("CNI_ARGS %q lacks %s", args, kv)
		}
	}
}

func fmtIPs(ips network.IPs) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

func TestTearDownAfterRestartUsesTheCachedSetUp(t *testing.T) {
	e := newScriptEnv(t)
	writeFile(t, filepath.Join(e.conf, "10-rec.conflist"), recordConflist, 0o644)
	opts := network.Options{PortMappings: []network.PortMapping{{HostPort: 8080, ContainerPort: 80}}}
	if _, err := e.new(t, 0).SetUp(context.Background(), pod, "/var/run/netns/x", opts); err != nil {
		t.Fatal(err)
	}
	// The configuration changes and the process restarts: DEL still runs
	// the list and the port mappings the sandbox was set up with.
	if err := os.Remove(filepath.Join(e.conf, "10-rec.conflist")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.conf, "10-other.conflist"), `{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"nk-record"}]}`, 0o644)
	if err := e.new(t, 0).TearDown(context.Background(), pod, "/var/run/netns/x", network.Options{}); err != nil {
		t.Fatal(err)
	}
	del := e.recorded(t, "DEL")
	if del["name"] != "rec" {
		t.Errorf("DEL ran network %v, want the set-up's %q", del["name"], "rec")
	}
	pms, _ := del["runtimeConfig"].(map[string]any)["portMappings"].([]any)
	if len(pms) != 1 {
		t.Errorf("DEL runtimeConfig = %v, want the set-up's port mapping", del["runtimeConfig"])
	}
	if _, ok := del["prevResult"]; !ok {
		t.Error("DEL got no prevResult from the cache")
	}
	// A second tear-down finds no cache and uses the current list.
	if err := e.new(t, 0).TearDown(context.Background(), pod, "", network.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := e.recorded(t, "DEL")["name"]; got != "other" {
		t.Errorf("second DEL ran network %v, want the current %q", got, "other")
	}
}

func TestHangingPluginIsKilledAtTheDeadline(t *testing.T) {
	e := newScriptEnv(t)
	pidFile := filepath.Join(e.bin, "child.pid")
	writeFile(t, filepath.Join(e.bin, "nk-hang"), "#!/bin/sh\nif [ \"$CNI_COMMAND\" = ADD ]; then sleep 600 & echo $! >"+pidFile+"; wait; fi\n", 0o755)
	writeFile(t, filepath.Join(e.conf, "10-hang.conflist"), `{"cniVersion":"1.0.0","name":"hang","plugins":[{"type":"nk-hang"}]}`, 0o644)
	n := e.new(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := n.SetUp(ctx, pod, "/var/run/netns/x", network.Options{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SetUp = %v, want a deadline error", err)
	}
	for _, s := range []string{`"ns1/web"`, "nk-hang", "10-hang.conflist"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	// The plugin's child was killed with it (its process group).
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			break // gone, or a zombie waiting for a reaper
		}
		if i > 1000 || time.Now().After(deadline) {
			t.Fatalf("the hanging plugin's child %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMissingPluginIsNamed(t *testing.T) {
	e := newScriptEnv(t)
	writeFile(t, filepath.Join(e.conf, "10-miss.conflist"), `{"cniVersion":"1.0.0","name":"miss","plugins":[{"type":"nk-record"},{"type":"nk-no-such-plugin"}]}`, 0o644)
	_, err := e.new(t, 0).SetUp(context.Background(), pod, "/var/run/netns/x", network.Options{})
	if !errors.Is(err, network.ErrNoConfig) {
		t.Fatalf("SetUp = %v, want ErrNoConfig", err)
	}
	for _, s := range []string{`"ns1/web"`, `plugin "nk-no-such-plugin" not found`, "10-miss.conflist", e.bin} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
}

func TestFailedPluginErrorIsReportedAndUndone(t *testing.T) {
	e := newScriptEnv(t)
	writeFile(t, filepath.Join(e.bin, "nk-fail"), "#!/bin/sh\n[ \"$CNI_COMMAND\" = ADD ] || exit 0\necho '{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"no more addresses\"}'\nexit 1\n", 0o755)
	writeFile(t, filepath.Join(e.conf, "10-fail.conflist"), `{"cniVersion":"1.0.0","name":"fail","plugins":[{"type":"nk-record"},{"type":"nk-fail"}]}`, 0o644)
	_, err := e.new(t, 0).SetUp(context.Background(), pod, "/var/run/netns/x", network.Options{})
	if err == nil || !strings.Contains(err.Error(), "no more addresses") || !strings.Contains(err.Error(), `"nk-fail"`) {
		t.Fatalf("SetUp = %v, want the plugin's message naming it", err)
	}
	// The first plugin's ADD was undone.
	e.recorded(t, "DEL")
}

func TestBadInputIsRefused(t *testing.T) {
	e := newScriptEnv(t)
	writeFile(t, filepath.Join(e.conf, "10-rec.conflist"), recordConflist, 0o644)
	n := e.new(t, 0)
	for _, tc := range []struct {
		name  string
		pod   network.PodRef
		netns string
		opts  network.Options
		want  string
	}{
		{"no sandbox", network.PodRef{Namespace: "a", Name: "b"}, "/x", network.Options{}, "SandboxID is required"},
		{"no netns", pod, "", network.Options{}, "network namespace path is required"},
		{"relative netns", pod, "x", network.Options{}, "is not absolute"},
		{"bad protocol", pod, "/x", network.Options{PortMappings: []network.PortMapping{{HostPort: 1, ContainerPort: 1, Protocol: "icmp"}}}, "PortMappings[0].Protocol"},
		{"bad port", pod, "/x", network.Options{PortMappings: []network.PortMapping{{HostPort: 70000, ContainerPort: 1}}}, "PortMappings[0]"},
		{"bad subnet", pod, "/x", network.Options{IPRanges: [][]network.IPRange{{{Subnet: "nope"}}}}, "IPRanges[0][0].Subnet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.SetUp(context.Background(), tc.pod, tc.netns, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SetUp = %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(e.bin, "rec", "ADD.json")); err == nil {
		t.Error("a plugin ran for bad input")
	}
}

func TestConfigIsValidated(t *testing.T) {
	for _, tc := range []struct {
		cfg  network.Config
		want string
	}{
		{network.Config{ConfDir: "rel"}, "Config.ConfDir"},
		{network.Config{BinDirs: []string{"/a", "b"}}, "Config.BinDirs[1]"},
		{network.Config{CacheDir: "c"}, "Config.CacheDir"},
		{network.Config{IfName: "a-very-long-interface"}, "Config.IfName"},
		{network.Config{Timeout: -1}, "Config.Timeout"},
	} {
		if _, err := network.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}
