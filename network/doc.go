// Package network sets up pod networks with CNI plugins, for runtimes
// that leave pod networking to the node agent (a custom runtime, or a
// CRI runtime of one's own; containerd and CRI-O run CNI themselves and
// need none of this).
//
// # What it does
//
// CNI implements Network through libcni
// (github.com/containernetworking/cni/libcni):
//
//   - The network configuration is the first usable file of a directory
//     (*.conflist, *.conf, *.json) in lexical order of names, as
//     containerd and CRI-O choose it. A file that does not parse, lists
//     no plugin, or names a plugin found in none of Config.BinDirs is
//     passed over; Conf and LoadConf say why. The directory is read again
//     before every operation (each file is parsed again only when its
//     size, modification time or inode changed), so a configuration
//     written after start-up, or a plugin installed later, is used
//     without a watch or a restart.
//   - SetUp runs ADD for a sandbox's network namespace with the pod's
//     runtime options as CNI capabilities (portMappings, bandwidth,
//     ipRanges, dns) and returns the pod's addresses (IPv4 and IPv6, the
//     host-side ones such as a bridge's left out). A failed ADD is undone
//     with DEL so that no address or port stays taken.
//   - libcni caches each ADD's result and configuration in
//     Config.CacheDir. Check (CHECK) and TearDown (DEL) use that cached
//     configuration and runtime options, so a sandbox is torn down the
//     way it was set up, also after the process restarted or the
//     configuration directory changed.
//   - Every operation is bounded by its context and Config.Timeout.
//     Plugins run in their own process group, killed as a group at the
//     deadline, so a plugin that hangs in a child process does not hold
//     the caller either.
//   - With Config.Loopback the "loopback" plugin brings the sandbox's lo
//     up first, as the kubelet's CNI network plugin did.
//   - The kubelet's network plugin metrics
//     (kubelet_network_plugin_operations_total, _errors_total and
//     _duration_seconds by operation_type) go to Config.Registerer.
//   - Errors name the pod, the sandbox, the network and the file it came
//     from, and libcni's description of the failing plugin; a missing
//     configuration matches ErrNoConfig (the runtime's NetworkReady
//     condition: Status).
//
// # What it leaves out
//
// Network namespaces are the runtime's: it creates one per sandbox,
// passes its path to SetUp and removes it after TearDown. There is no
// CNI GC or STATUS call, no multiple networks per pod (Multus-style
// attachments), and no retry of plugins that report "text file busy"
// while being installed. Hand-written here rather than taken from a
// library: the choice of the configuration file (libcni loads files
// but does not choose among them) and the plugin executor with its
// process-group kill (libcni's kills only the plugin process and sleeps
// between retries).
//
// # Swapping it
//
// Network is the seam: a runtime calls SetUp when it has created a
// sandbox and TearDown before it removes it. Anything with those two
// methods fits (a fake in tests, a CNI library of one's own); Checker is
// the optional CHECK.
//
// # Usage
//
//	n, err := network.New(network.Config{
//		ConfDir: "/etc/cni/net.d",
//		BinDirs: []string{"/opt/cni/bin"},
//	})
//	if err != nil {
//		return err // a bad Config field, named
//	}
//	ips, err := n.SetUp(ctx, network.PodRef{Namespace: "default", Name: "web", UID: uid, SandboxID: id},
//		"/var/run/netns/"+id, network.Options{PortMappings: []network.PortMapping{{HostPort: 8080, ContainerPort: 80}}})
//	// ... later, also from a new process:
//	err = n.TearDown(ctx, network.PodRef{Namespace: "default", Name: "web", UID: uid, SandboxID: id},
//		"/var/run/netns/"+id, network.Options{})
package network
