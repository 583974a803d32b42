package cri

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's resolver limits.
const (
	maxNameservers = 3
	maxSearches    = 32
)

// dnsConfig computes the sandbox's resolver from dnsPolicy and dnsConfig,
// as the kubelet does. It returns nil to leave the runtime's default.
func (r *Runtime) dnsConfig(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = v1.DNSDefault
	}
	if policy == v1.DNSClusterFirstWithHostNet {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && len(r.cfg.ClusterDNS) == 0 {
		r.cfg.Events(pod, v1.EventTypeWarning, "MissingClusterDNS",
			"pod: \""+podRef(pod)+"\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.")
		policy = v1.DNSDefault
	}
	cfg := &runtimeapi.DNSConfig{}
	switch policy {
	case v1.DNSClusterFirst:
		cfg.Servers = append([]string(nil), r.cfg.ClusterDNS...)
		if d := r.cfg.ClusterDomain; d != "" {
			cfg.Searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
		}
		host, err := r.hostResolver()
		if err != nil {
			return nil, err
		}
		cfg.Searches = append(cfg.Searches, host.Searches...)
		cfg.Options = []string{"ndots:5"}
	case v1.DNSDefault:
		host, err := r.hostResolver()
		if err != nil {
			return nil, err
		}
		cfg = host
	case v1.DNSNone:
		if pod.Spec.DNSConfig == nil {
			return nil, fmt.Errorf("spec.dnsConfig: required with dnsPolicy None")
		}
	default:
		return nil, fmt.Errorf("spec.dnsPolicy: unsupported %q", pod.Spec.DNSPolicy)
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = dedupe(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = dedupe(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeOptions(cfg.Options, dc.Options)
	}
	if len(cfg.Servers) > maxNameservers {
		cfg.Servers = cfg.Servers[:maxNameservers]
	}
	if len(cfg.Searches) > maxSearches {
		cfg.Searches = cfg.Searches[:maxSearches]
	}
	return cfg, nil
}

// hostResolver reads the node's resolv.conf ("-": none).
func (r *Runtime) hostResolver() (*runtimeapi.DNSConfig, error) {
	cfg := &runtimeapi.DNSConfig{}
	if r.cfg.ResolvConf == "-" {
		return cfg, nil
	}
	f, err := os.Open(r.cfg.ResolvConf)
	if os.IsNotExist(err) {
		return cfg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the node's resolver %s: %w", r.cfg.ResolvConf, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			cfg.Servers = append(cfg.Servers, fields[1])
		case "search", "domain":
			cfg.Searches = fields[1:]
		case "options":
			cfg.Options = append(cfg.Options, fields[1:]...)
		}
	}
	return cfg, sc.Err()
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	out := list[:0:0]
	for _, s := range list {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mergeOptions applies pod options over base ones by name.
func mergeOptions(base []string, pod []v1.PodDNSConfigOption) []string {
	names := []string{}
	values := map[string]string{}
	put := func(name, value string) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = value
	}
	for _, o := range base {
		name, value, _ := strings.Cut(o, ":")
		put(name, value)
	}
	for _, o := range pod {
		v := ""
		if o.Value != nil {
			v = *o.Value
		}
		put(o.Name, v)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if values[n] == "" {
			out = append(out, n)
		} else {
			out = append(out, n+":"+values[n])
		}
	}
	return out
}
