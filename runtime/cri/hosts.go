package cri

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// etcHostsPath is where a container sees its hosts file.
const etcHostsPath = "/etc/hosts"

// The first line of a hosts file the runtime writes, the kubelet's: the
// conformance suite checks that a pod's /etc/hosts starts with the first.
const (
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// hostsFileName is the pod's hosts file in its directory under PodsDir.
const hostsFileName = "etc-hosts"

// podHostnameAndDomain returns the short hostname and the DNS domain a
// pod's hosts file and sandbox get, as the kubelet computes them:
// spec.hostnameOverride alone when set (no domain), else spec.hostname
// or the pod name, with the domain <subdomain>.<namespace>.svc.<cluster
// domain> when spec.subdomain is set. The hostname is cut to 63
// characters without a trailing '-' or '.'. A name that is not valid
// fails naming the field (the API server refuses such pods; a source
// that skips validation may not).
func podHostnameAndDomain(pod *v1.Pod, clusterDomain string) (hostname, domain string, err error) {
	bad := func(field, value string, msgs []string) error {
		return fmt.Errorf("cri: pod %s: %s %q is not valid: %s: %w", podRef(pod), field, value, strings.Join(msgs, "; "), runtime.ErrInvalidArgument)
	}
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) > 0 {
			return "", "", bad("spec.hostnameOverride", *o, msgs)
		}
		h, err := cutHostname(pod, "spec.hostnameOverride", *o)
		return h, "", err
	}
	h, field := pod.Name, "metadata.name"
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) > 0 {
			return "", "", bad("spec.hostname", pod.Spec.Hostname, msgs)
		}
		h, field = pod.Spec.Hostname, "spec.hostname"
	}
	if hostname, err = cutHostname(pod, field, h); err != nil {
		return "", "", err
	}
	if s := pod.Spec.Subdomain; s != "" {
		if msgs := validation.IsDNS1123Label(s); len(msgs) > 0 {
			return "", "", bad("spec.subdomain", s, msgs)
		}
		domain = s + "." + pod.Namespace + ".svc." + clusterDomain
	}
	return hostname, domain, nil
}

// shouldMountHosts reports whether the runtime gives c the pod's hosts
// file at /etc/hosts, as the kubelet decides: the pod is on the host
// network or has an IP, and c mounts nothing at /etc/hosts itself.
func shouldMountHosts(pod *v1.Pod, c *v1.Container, podIPs []string) bool {
	if len(podIPs) == 0 && !pod.Spec.HostNetwork {
		return false
	}
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == etcHostsPath {
			return false
		}
	}
	return true
}

// hostsMount writes the pod's hosts file (<PodsDir>/<uid>/etc-hosts) and
// returns its mount at /etc/hosts, or nil when c does not get one
// (shouldMountHosts). The file is written again before each container
// is created, as the kubelet does, in place: running containers have it
// bind-mounted and see the new content.
func (r *Runtime) hostsMount(pod *v1.Pod, c *v1.Container, podIPs []string) (*runtimeapi.Mount, error) {
	if !shouldMountHosts(pod, c, podIPs) {
		return nil, nil
	}
	var content []byte
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(r.cfg.NodeHostsFile)
		if err != nil {
			return nil, fmt.Errorf("the node's hosts file: %w", err)
		}
		content = nodeHostsContent(node, pod.Spec.HostAliases)
	} else {
		hostname, domain, err := podHostnameAndDomain(pod, r.cfg.ClusterDomain)
		if err != nil {
			return nil, err
		}
		content = managedHostsContent(podIPs, hostname, domain, pod.Spec.HostAliases)
	}
	dir, err := r.podDir(pod)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, hostsFileName)
	if err := writeInPlace(path, content, 0o644); err != nil {
		return nil, err
	}
	return &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: path, SelinuxRelabel: true}, nil
}

// podDir is the pod's directory under PodsDir. A UID that is not one
// plain path element is refused (checkUID), so nothing is written outside
// PodsDir.
func (r *Runtime) podDir(pod *v1.Pod) (string, error) {
	if err := checkUID(pod.UID); err != nil {
		return "", err
	}
	return filepath.Join(r.cfg.PodsDir, string(pod.UID)), nil
}

// checkUID refuses a UID that is not one plain path element: empty, "."
// or "..", or holding a slash, a backslash or a NUL. The pod's directory
// and its log directory are named after it.
func checkUID(uid types.UID) error {
	if s := string(uid); s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00") {
		return fmt.Errorf("metadata.uid: Invalid value: %q: cannot name a directory: %w", s, runtime.ErrInvalidArgument)
	}
	return nil
}

// writeInPlace makes path hold content with mode perm (whatever the
// umask), leaving it untouched when it does already. The file is
// rewritten, not replaced, so that bind mounts of it see the change.
// Anything but a regular file at path (a symlink) is refused. The pod's
// directory is the runtime's alone: no container sees it, only the file.
func writeInPlace(path string, content []byte, perm fs.FileMode) error {
	if st, err := os.Lstat(path); err == nil {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) && st.Mode().Perm() == perm {
			return nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(content)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}

// managedHostsContent is the hosts file of a pod on the pod network, the
// kubelet's: the localhost lines, each pod IP with the pod's FQDN and
// hostname (the hostname alone without a domain), then the hostAliases.
func managedHostsContent(podIPs []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasesContent(aliases))
	return b.Bytes()
}

// nodeHostsContent is the hosts file of a host-network pod, the
// kubelet's: the node's own, then the hostAliases.
func nodeHostsContent(node []byte, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderHostNetwork)
	b.Write(node)
	b.Write(hostAliasesContent(aliases))
	return b.Bytes()
}

// hostAliasesContent is the block the hostAliases add: a blank line, a
// comment, and one line per alias with its IP and its hostnames,
// tab-separated.
func hostAliasesContent(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}
