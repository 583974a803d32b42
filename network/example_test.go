package network_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/network"
)

// Loading a configuration directory checks each file in lexical order
// and says why the ones before the chosen file were passed over.
func ExampleLoadConf() {
	dir, _ := os.MkdirTemp("", "netd")
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bin")
	_ = os.Mkdir(bin, 0o755)
	for _, p := range []string{"bridge", "host-local", "portmap"} {
		_ = os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\n"), 0o755)
	}
	_ = os.WriteFile(filepath.Join(dir, "05-typo.conflist"), []byte(`{"name": "typo", "plugins": [`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "10-pods.conflist"), []byte(`{
  "cniVersion": "1.0.0", "name": "pods",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "ipam": {"type": "host-local", "subnet": "10.250.0.0/24"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]}`), 0o644)

	conf, err := network.LoadConf(dir, []string{bin})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(filepath.Base(conf.File), conf.Name, conf.Plugins)
	for _, s := range conf.Skipped {
		fmt.Println("skipped", s)
	}

	_ = os.Remove(filepath.Join(bin, "portmap"))
	_, err = network.LoadConf(dir, []string{bin})
	fmt.Println(errors.Is(err, network.ErrNoConfig))
	// Output:
	// 10-pods.conflist pods [bridge portmap]
	// skipped 05-typo.conflist: error parsing configuration list: unexpected end of JSON input
	// true
}
