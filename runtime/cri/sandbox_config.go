package cri

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// podLogDir is <root>/<namespace>_<name>_<uid>, the kubelet's layout.
// Its parts are checked first (pathSafe).
func (r *Runtime) podLogDir(pod *v1.Pod) string {
	return filepath.Join(r.cfg.PodLogsDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		o.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		o.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		o.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		o.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return o
}

// pathSafe checks the parts of a pod that name its log directory, as the
// API server's validation would: the namespace a DNS-1123 label (or empty,
// as a pod given to this package alone may be), the name
// a DNS-1123 subdomain, the UID one plain path element (checkUID).
// A caller of this package need not have validated the pod: a name like
// "../x" must not reach the node's files.
func pathSafe(pod *v1.Pod) error {
	if errs := validation.IsDNS1123Label(pod.Namespace); pod.Namespace != "" && len(errs) > 0 {
		return fmt.Errorf("metadata.namespace: Invalid value: %q: %s", pod.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(pod.Name); len(errs) > 0 {
		return fmt.Errorf("metadata.name: Invalid value: %q: %s", pod.Name, strings.Join(errs, "; "))
	}
	return checkUID(pod.UID)
}

// sandboxConfig is the CRI sandbox config for a pod. Errors name the
// field.
func (r *Runtime) sandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	if err := pathSafe(pod); err != nil {
		return nil, err
	}
	dns, err := r.dnsConfig(pod)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		LogDirectory: r.podLogDir(pod),
		Labels:       sandboxLabels(pod),
		Annotations:  maps.Clone(pod.Annotations),
		DnsConfig:    dns,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: r.cgroupParent(pod),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: namespaceOptions(pod),
				Privileged:       hasPrivilegedContainer(pod),
			},
		},
	}
	if !pod.Spec.HostNetwork {
		h, err := sandboxHostname(pod, r.cfg.ClusterDomain)
		if err != nil {
			return nil, err
		}
		cfg.Hostname = h
	}
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			if p.HostPort <= 0 {
				continue
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol:      protocol(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		lsc := cfg.Linux.SecurityContext
		if sc.RunAsUser != nil {
			lsc.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
		}
		if sc.RunAsGroup != nil {
			lsc.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
		}
		lsc.SupplementalGroups = sc.SupplementalGroups
		for _, s := range sc.Sysctls {
			if cfg.Linux.Sysctls == nil {
				cfg.Linux.Sysctls = map[string]string{}
			}
			cfg.Linux.Sysctls[s.Name] = s.Value
		}
		if sc.SeccompProfile != nil {
			p, err := r.seccompProfile(sc.SeccompProfile, "spec")
			if err != nil {
				return nil, err
			}
			cfg.Linux.SecurityContext.Seccomp = p
		}
	}
	return cfg, nil
}

// hasPrivilegedContainer reports whether any container of the pod (init,
// regular or ephemeral) asks to be privileged. The kubelet then marks the
// whole sandbox privileged: runtimes such as containerd refuse a
// privileged container in a sandbox that is not.
func hasPrivilegedContainer(pod *v1.Pod) bool {
	priv := func(sc *v1.SecurityContext) bool {
		return sc != nil && sc.Privileged != nil && *sc.Privileged
	}
	for i := range pod.Spec.InitContainers {
		if priv(pod.Spec.InitContainers[i].SecurityContext) {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if priv(pod.Spec.Containers[i].SecurityContext) {
			return true
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if priv(pod.Spec.EphemeralContainers[i].SecurityContext) {
			return true
		}
	}
	return false
}

// maxHostnameLen is the longest hostname the kernel accepts: the
// nodename field holds 64 bytes including the terminating NUL.
const maxHostnameLen = 63

// maxFQDNLen is the longest FQDN the kubelet gives the kernel under
// setHostnameAsFQDN.
const maxFQDNLen = 64

// sandboxHostname is the hostname a pod's sandbox gets, as the kubelet
// chooses it: the pod's hostname (podHostnameAndDomain), or under
// setHostnameAsFQDN with a domain, hostname.domain, which must fit in 64
// characters.
func sandboxHostname(pod *v1.Pod, clusterDomain string) (string, error) {
	h, domain, err := podHostnameAndDomain(pod, clusterDomain)
	if err != nil {
		return "", err
	}
	if fqdn := pod.Spec.SetHostnameAsFQDN; fqdn != nil && *fqdn && domain != "" {
		h += "." + domain
		if len(h) > maxFQDNLen {
			return "", fmt.Errorf("cri: pod %s: spec.setHostnameAsFQDN: the FQDN %q is %d characters long, more than %d: %w",
				podRef(pod), h, len(h), maxFQDNLen, runtime.ErrInvalidArgument)
		}
	}
	return h, nil
}

// cutHostname cuts h, from field, to 63 characters, then strips trailing
// '-' and '.' so the result is still a valid name.
func cutHostname(pod *v1.Pod, field, h string) (string, error) {
	if len(h) <= maxHostnameLen {
		return h, nil
	}
	t := strings.TrimRight(h[:maxHostnameLen], "-.")
	if t == "" {
		return "", fmt.Errorf("cri: pod %s/%s: %s %q gives no valid hostname when cut to %d characters: %w",
			pod.Namespace, pod.Name, field, h, maxHostnameLen, runtime.ErrInvalidArgument)
	}
	return t, nil
}

func protocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}
