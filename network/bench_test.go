package network_test

import (
	"path/filepath"
	"testing"

	"github.com/nodekit/nodekit/network"
)

// BenchmarkConf is the cost of reading the configuration directory again
// before an operation when nothing changed: three files, the usable one
// last, each plugin looked up in the bin dir.
func BenchmarkConf(b *testing.B) {
	e := newScriptEnv(b)
	writeFile(b, filepath.Join(e.conf, "01-broken.conflist"), `{"name":`, 0o644)
	writeFile(b, filepath.Join(e.conf, "02-missing.conflist"), `{"cniVersion":"1.0.0","name":"m","plugins":[{"type":"nk-absent"}]}`, 0o644)
	writeFile(b, filepath.Join(e.conf, "10-rec.conflist"), recordConflist, 0o644)
	n, err := network.New(network.Config{ConfDir: e.conf, BinDirs: []string{e.bin}, CacheDir: e.cache})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c, err := n.Conf()
		if err != nil || c.Name != "rec" {
			b.Fatal(c, err)
		}
	}
}

// BenchmarkRealSetUpTearDown is one ADD and one DEL of a pod with
// Debian's loopback, bridge, host-local and portmap plugins (one host
// port), in one namespace set up and torn down again each round.
func BenchmarkRealSetUpTearDown(b *testing.B) {
	e := newBridgeEnv(b)
	n := e.new(b)
	ns := newNetns(b)
	ref := network.PodRef{Namespace: "bench", Name: "pod", UID: "uid", SandboxID: "sb-" + randomHex(b, 8)}
	opts := network.Options{PortMappings: []network.PortMapping{{HostPort: 18080, ContainerPort: 80, HostIP: "127.0.0.1"}}}
	for b.Loop() {
		if _, err := n.SetUp(b.Context(), ref, ns, opts); err != nil {
			b.Fatal(err)
		}
		if err := n.TearDown(b.Context(), ref, ns, opts); err != nil {
			b.Fatal(err)
		}
	}
}
