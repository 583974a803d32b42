package cri_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// serviceList is an in-memory cri.ServiceLister; err fails every list.
type serviceList struct {
	services []*v1.Service
	err      error
}

func (l serviceList) ListServices(_ context.Context, ns string) ([]*v1.Service, error) {
	if l.err != nil {
		return nil, l.err
	}
	var out []*v1.Service
	for _, s := range l.services {
		if s.Namespace == ns {
			out = append(out, s)
		}
	}
	return out, nil
}

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceEnvironment(t *testing.T) {
	master := svc("default", "kubernetes", "10.0.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP})
	masterVars := map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT": "tcp://10.0.0.1:443", "KUBERNETES_PORT_443_TCP": "tcp://10.0.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp", "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.0.0.1",
	}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range masterVars {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		services []*v1.Service // besides master
		noMaster bool
		links    *bool
		env      []v1.EnvVar
		static   bool
		listErr  error
		want     map[string]string
		wantErr  string
	}{
		{name: "unnamed port, protocol defaults to TCP",
			services: []*v1.Service{svc("ns", "my-db", "10.0.0.7", v1.ServicePort{Port: 5432})},
			want: with(map[string]string{
				"MY_DB_SERVICE_HOST": "10.0.0.7", "MY_DB_SERVICE_PORT": "5432",
				"MY_DB_PORT": "tcp://10.0.0.7:5432", "MY_DB_PORT_5432_TCP": "tcp://10.0.0.7:5432",
				"MY_DB_PORT_5432_TCP_PROTO": "tcp", "MY_DB_PORT_5432_TCP_PORT": "5432", "MY_DB_PORT_5432_TCP_ADDR": "10.0.0.7",
			})},
		{name: "named UDP and SCTP ports, IPv6",
			services: []*v1.Service{svc("ns", "dns", "fd00::a",
				v1.ServicePort{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP},
				v1.ServicePort{Name: "sig", Port: 9, Protocol: v1.ProtocolSCTP})},
			want: with(map[string]string{
				"DNS_SERVICE_HOST": "fd00::a", "DNS_SERVICE_PORT": "53", "DNS_SERVICE_PORT_DNS_UDP": "53", "DNS_SERVICE_PORT_SIG": "9",
				"DNS_PORT":        "udp://[fd00::a]:53",
				"DNS_PORT_53_UDP": "udp://[fd00::a]:53", "DNS_PORT_53_UDP_PROTO": "udp", "DNS_PORT_53_UDP_PORT": "53", "DNS_PORT_53_UDP_ADDR": "fd00::a",
				"DNS_PORT_9_SCTP": "sctp://[fd00::a]:9", "DNS_PORT_9_SCTP_PROTO": "sctp", "DNS_PORT_9_SCTP_PORT": "9", "DNS_PORT_9_SCTP_ADDR": "fd00::a",
			})},
		{name: "headless, address-less and other namespaces' services are skipped",
			services: []*v1.Service{
				svc("ns", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
				svc("ns", "pending", "", v1.ServicePort{Port: 80}),
				svc("other", "elsewhere", "10.0.0.9", v1.ServicePort{Port: 80}),
				svc("default", "not-master", "10.0.0.10", v1.ServicePort{Port: 80}),
			},
			want: masterVars},
		{name: "enableServiceLinks false keeps only the master service",
			services: []*v1.Service{svc("ns", "web", "10.0.0.8", v1.ServicePort{Port: 80})},
			links:    ptr.To(false),
			want:     masterVars},
		{name: "explicit env wins and expands against service variables",
			services: []*v1.Service{svc("ns", "web", "10.0.0.8", v1.ServicePort{Port: 80})},
			env: []v1.EnvVar{
				{Name: "WEB_SERVICE_PORT", Value: "8080"},
				{Name: "URL", Value: "http://$(WEB_SERVICE_HOST):$(WEB_SERVICE_PORT)/$(KUBERNETES_SERVICE_PORT)"},
			},
			want: with(map[string]string{
				"WEB_SERVICE_HOST": "10.0.0.8", "WEB_SERVICE_PORT": "8080", "URL": "http://10.0.0.8:8080/443",
				"WEB_PORT": "tcp://10.0.0.8:80", "WEB_PORT_80_TCP": "tcp://10.0.0.8:80",
				"WEB_PORT_80_TCP_PROTO": "tcp", "WEB_PORT_80_TCP_PORT": "80", "WEB_PORT_80_TCP_ADDR": "10.0.0.8",
			})},
		{name: "a kubernetes service of the pod's namespace replaces the master's",
			services: []*v1.Service{svc("ns", "kubernetes", "10.0.0.5", v1.ServicePort{Port: 80})},
			want: map[string]string{
				"KUBERNETES_SERVICE_HOST": "10.0.0.5", "KUBERNETES_SERVICE_PORT": "80",
				"KUBERNETES_PORT": "tcp://10.0.0.5:80", "KUBERNETES_PORT_80_TCP": "tcp://10.0.0.5:80",
				"KUBERNETES_PORT_80_TCP_PROTO": "tcp", "KUBERNETES_PORT_80_TCP_PORT": "80", "KUBERNETES_PORT_80_TCP_ADDR": "10.0.0.5",
			}},
		{name: "no master service, no links", noMaster: true, links: ptr.To(false), want: map[string]string{}},
		{name: "a failed list fails the container", listErr: errors.New("not synced"),
			wantErr: "service environment variables: not synced"},
		{name: "a static pod starts without services when the list fails", listErr: errors.New("not synced"),
			static: true, want: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			services := tc.services
			if !tc.noMaster {
				services = append([]*v1.Service{master}, services...)
			}
			h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
				c.Services = serviceList{services: services, err: tc.listErr}
			})
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.EnableServiceLinks = tc.links
			pod.Spec.Containers[0].Env = tc.env
			if tc.static {
				pod.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
			}
			pod.Spec.Containers[0].Args = []string{"$(KUBERNETES_SERVICE_HOST)"}
			res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
			if s := lastStep(res, "app"); tc.wantErr != "" {
				if s.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(s.Message, tc.wantErr) {
					t.Fatalf("step %+v, want CreateContainerConfigError with %q", s, tc.wantErr)
				}
				return
			} else if s.Err != nil {
				t.Fatalf("step %+v, want the container started", s)
			}
			got := map[string]string{}
			for _, kv := range h.rec.config("app").GetEnvs() {
				got[kv.GetKey()] = string(kv.GetValue())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			// Args expand against the whole environment, service
			// variables included.
			wantArg, ok := tc.want["KUBERNETES_SERVICE_HOST"]
			if !ok {
				wantArg = "$(KUBERNETES_SERVICE_HOST)"
			}
			if args := h.rec.config("app").GetArgs(); len(args) != 1 || args[0] != wantArg {
				t.Errorf("args %q, want [%q]", args, wantArg)
			}
		})
	}
}

func TestNoServiceListerNoServiceVariables(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	h.sync(pod)
	if envs := h.rec.config("app").GetEnvs(); len(envs) != 0 {
		t.Errorf("env %v, want none without Config.Services", envs)
	}
}
