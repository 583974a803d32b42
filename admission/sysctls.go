package admission

import (
	"fmt"
	"strings"

	"k8s.io/component-helpers/node/util/sysctl"
)

// ReasonSysctlForbidden is the reason of a pod refused for its sysctls.
const ReasonSysctlForbidden = "SysctlForbidden"

// safeSysctls are the sysctls every pod may set, the kubelet's safe set.
// The kubelet drops those the running kernel is too old for; nodekit
// leaves that check to the runtime, which fails to set them.
func safeSysctls() []string {
	return []string{
		"kernel.shm_rmid_forced",
		"net.ipv4.ip_local_port_range",
		"net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range",
		"net.ipv4.ip_unprivileged_port_start",
		"net.ipv4.ip_local_reserved_ports",
		"net.ipv4.tcp_keepalive_time",
		"net.ipv4.tcp_fin_timeout",
		"net.ipv4.tcp_keepalive_intvl",
		"net.ipv4.tcp_keepalive_probes",
		"net.ipv4.tcp_rmem",
		"net.ipv4.tcp_wmem",
		"net.ipv4.tcp_slow_start_after_idle",
		"net.ipv4.tcp_notsent_lowat",
	}
}

// Sysctls refuses pods that set sysctls outside the safe set and the
// allowed patterns, or a namespaced sysctl together with the host's
// namespace of that kind (net.* with hostNetwork, kernel.shm*/msg*/sem
// with hostIPC). Build it with NewSysctls.
type Sysctls struct {
	exact    map[string]sysctl.Namespace
	prefixes map[string]sysctl.Namespace
}

// NewSysctls builds the sysctl handler from the allowed unsafe sysctls:
// names ("kernel.msgmax") or prefixes ("net.core.*"). It returns an error
// naming a pattern that is not a namespaced sysctl or prefix.
func NewSysctls(allowedUnsafe []string) (*Sysctls, error) {
	s := &Sysctls{exact: map[string]sysctl.Namespace{}, prefixes: map[string]sysctl.Namespace{}}
	for _, p := range append(safeSysctls(), allowedUnsafe...) {
		if p == "" || strings.ContainsAny(p, " \t") || strings.Contains(strings.TrimSuffix(p, "*"), "*") {
			return nil, fmt.Errorf("admission: allowed unsafe sysctl %q is not a sysctl name or a \"prefix.*\" pattern", p)
		}
		ns, name, prefixed := sysctl.GetNamespace(p)
		if ns == sysctl.UnknownNamespace {
			return nil, fmt.Errorf("admission: allowed unsafe sysctl %q is not known to be namespaced", p)
		}
		if prefixed {
			s.prefixes[name] = ns
		} else {
			s.exact[name] = ns
		}
	}
	return s, nil
}

// Admit implements Handler.
func (s *Sysctls) Admit(a Attributes) Result {
	sc := a.Pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return admitted
	}
	hostUsers := a.Pod.Spec.HostUsers == nil || *a.Pod.Spec.HostUsers
	for _, sy := range sc.Sysctls {
		if err := s.check(sysctl.NormalizeName(sy.Name), a.Pod.Spec.HostNetwork, a.Pod.Spec.HostIPC, hostUsers); err != "" {
			return Result{Reason: ReasonSysctlForbidden, Message: "forbidden sysctl: " + err}
		}
	}
	return admitted
}

func (s *Sysctls) check(name string, hostNet, hostIPC, hostUsers bool) string {
	ns, ok := s.exact[name]
	if !ok {
		for p, pns := range s.prefixes {
			if strings.HasPrefix(name, p) {
				ns, ok = pns, true
				break
			}
		}
	}
	if !ok {
		return fmt.Sprintf("%q not allowlisted", name)
	}
	if (ns == sysctl.IPCNamespace && hostIPC) || (ns == sysctl.NetNamespace && hostNet) || (ns == sysctl.UserNamespace && hostUsers) {
		return fmt.Sprintf("%q not allowed with host %s enabled", name, ns)
	}
	return ""
}
