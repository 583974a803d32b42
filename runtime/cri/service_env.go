package cri

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/podutil"
)

// masterService is the service of the API server, whose variables every
// container gets whatever its pod's enableServiceLinks says.
const masterService = "kubernetes"

// serviceEnv returns the service environment variables of pod's
// containers: the "kubernetes" service of the default namespace, and,
// unless the pod sets enableServiceLinks: false, every service of its
// namespace. Services without a cluster IP (headless) are skipped.
func (r *Runtime) serviceEnv(ctx context.Context, pod *v1.Pod) (*envList, error) {
	env := &envList{}
	if r.cfg.Services == nil {
		return env, nil
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	picked := map[string]*v1.Service{}
	defaults, err := r.cfg.Services.ListServices(ctx, metav1.NamespaceDefault)
	if err == nil {
		for _, s := range defaults {
			if s != nil && s.Name == masterService && hasClusterIP(s) {
				picked[s.Name] = s
			}
		}
		if links {
			var own []*v1.Service
			own, err = r.cfg.Services.ListServices(ctx, pod.Namespace)
			for _, s := range own {
				if s == nil || !hasClusterIP(s) {
					continue
				}
				// A "kubernetes" service of the pod's own namespace
				// replaces the default namespace's, as in the kubelet.
				picked[s.Name] = s
			}
		}
	}
	if err != nil {
		if podutil.IsStatic(pod) {
			return &envList{}, nil
		}
		return nil, fmt.Errorf("service environment variables: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(picked)) {
		serviceVars(env, picked[name])
	}
	return env, nil
}

// hasClusterIP is false for headless services ("None") and those without
// an address.
func hasClusterIP(s *v1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone
}

// serviceVars adds one service's variables: FOO_SERVICE_HOST,
// FOO_SERVICE_PORT (the first port), FOO_SERVICE_PORT_<NAME> per named
// port, and the Docker link variables FOO_PORT and FOO_PORT_<n>_<PROTO>
// with its _PROTO, _PORT and _ADDR.
func serviceVars(env *envList, s *v1.Service) {
	prefix := envVarName(s.Name)
	ip := s.Spec.ClusterIP
	env.set(prefix+"_SERVICE_HOST", ip)
	if len(s.Spec.Ports) == 0 {
		return
	}
	env.set(prefix+"_SERVICE_PORT", strconv.Itoa(int(s.Spec.Ports[0].Port)))
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			env.set(prefix+"_SERVICE_PORT_"+envVarName(p.Name), strconv.Itoa(int(p.Port)))
		}
	}
	for i, p := range s.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(v1.ProtocolTCP)
		}
		port := strconv.Itoa(int(p.Port))
		lower := strings.ToLower(proto)
		url := lower + "://" + net.JoinHostPort(ip, port)
		if i == 0 {
			env.set(prefix+"_PORT", url)
		}
		pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
		env.set(pp, url)
		env.set(pp+"_PROTO", lower)
		env.set(pp+"_PORT", port)
		env.set(pp+"_ADDR", ip)
	}
}

// envVarName is a service or port name as a variable name: upper case,
// '-' as '_'.
func envVarName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}
