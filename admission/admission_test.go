package admission_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
)

func pod(name string, mut ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}},
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

func requests(cpu, mem string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		p.Spec.Containers[0].Resources.Requests = l
	}
}

func node(mut ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}}
	n.Status.Allocatable = v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("1"),
		v1.ResourceMemory: resource.MustParse("1Gi"),
		v1.ResourcePods:   resource.MustParse("2"),
	}
	for _, m := range mut {
		m(n)
	}
	return n
}

func TestDefaults(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	static := func(p *v1.Pod) { p.Annotations = map[string]string{"kubernetes.io/config.source": "file"} }
	noExec := func(n *v1.Node) {
		n.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoExecute}}
	}
	hostPort := func(ip string, port int32) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: port, HostIP: ip}}
		}
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		others   []*v1.Pod
		node     *v1.Node
		pressure admission.PressureFunc
		want     admission.Result
	}{
		{name: "fits", pod: pod("a", requests("500m", "100Mi")), others: []*v1.Pod{pod("b", requests("500m", ""))}, node: node(),
			want: admission.Result{Admit: true}},
		{name: "cpu counts the other pods' requests", pod: pod("a", requests("600m", "")), others: []*v1.Pod{pod("b", requests("500m", ""))}, node: node(),
			want: admission.Result{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 600, used: 500, capacity: 1000"}},
		{name: "every container of the other pods counts", node: node(), pod: pod("a", requests("600m", "")), others: []*v1.Pod{pod("b", requests("300m", ""), func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("0.2")}}})
		})}, want: admission.Result{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 600, used: 500, capacity: 1000"}},
		{name: "the other pods' overhead counts", node: node(), pod: pod("a", requests("600m", "")), others: []*v1.Pod{pod("b", requests("300m", ""), func(p *v1.Pod) {
			p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("150m")}
		})}, want: admission.Result{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 600, used: 450, capacity: 1000"}},
		{name: "memory", pod: pod("a", requests("", "2Gi")), node: node(),
			want: admission.Result{Reason: "OutOfmemory", Message: "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824"}},
		{name: "pods before cpu", pod: pod("a", requests("2", "")), others: []*v1.Pod{pod("b"), pod("c")}, node: node(),
			want: admission.Result{Reason: "OutOfpods", Message: "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"}},
		{name: "an init container's request counts when larger", node: node(), pod: pod("a", requests("200m", ""), func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}}}
		}), want: admission.Result{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 1500, used: 0, capacity: 1000"}},
		{name: "a sidecar's request adds to the containers'", node: node(), pod: pod("a", requests("600m", ""), func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}}}
		}), want: admission.Result{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 1100, used: 0, capacity: 1000"}},
		{name: "extended resource", node: node(func(n *v1.Node) { n.Status.Allocatable["example.com/gpu"] = resource.MustParse("1") }),
			pod: pod("a", func(p *v1.Pod) {
				p.Spec.Containers[0].Resources.Requests = v1.ResourceList{"example.com/gpu": resource.MustParse("2")}
			}), want: admission.Result{Reason: "OutOfexample.com/gpu", Message: "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1"}},
		{name: "no allocatable checks nothing", pod: pod("a", requests("64", "1Ti")), node: node(func(n *v1.Node) { n.Status.Allocatable = nil }),
			want: admission.Result{Admit: true}},
		{name: "node selector", node: node(), pod: pod("a", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }),
			want: admission.Result{Reason: "NodeAffinity", Message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"}},
		{name: "required node affinity", node: node(), pod: pod("a", func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"b", "c"}}}}},
			}}}
		}), want: admission.Result{Reason: "NodeAffinity", Message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"}},
		{name: "matching affinity", node: node(), pod: pod("a", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }),
			want: admission.Result{Admit: true}},
		{name: "node name", node: node(), pod: pod("a", func(p *v1.Pod) { p.Spec.NodeName = "n2" }),
			want: admission.Result{Reason: "NodeName", Message: "Predicate NodeName failed: node(s) didn't match the requested node name"}},
		{name: "host port in use", node: node(), pod: pod("a", hostPort("", 8080)), others: []*v1.Pod{pod("b", hostPort("127.0.0.1", 8080))},
			want: admission.Result{Reason: "NodePorts", Message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"}},
		{name: "host port on another IP", node: node(), pod: pod("a", hostPort("127.0.0.2", 8080)), others: []*v1.Pod{pod("b", hostPort("127.0.0.1", 8080))},
			want: admission.Result{Admit: true}},
		{name: "NoExecute taint", node: node(noExec), pod: pod("a"),
			want: admission.Result{Reason: "TaintToleration", Message: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"}},
		{name: "NoExecute taint tolerated", node: node(noExec), pod: pod("a", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}}
		}), want: admission.Result{Admit: true}},
		{name: "NoExecute taint, static pod", node: node(noExec), pod: pod("a", static), want: admission.Result{Admit: true}},
		{name: "NoSchedule taint is the scheduler's", node: node(func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}
		}), pod: pod("a"), want: admission.Result{Admit: true}},
		{name: "unsafe sysctl", node: node(), pod: pod("a", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}}
		}), want: admission.Result{Reason: "SysctlForbidden", Message: `forbidden sysctl: "kernel.msgmax" not allowlisted`}},
		{name: "allowed unsafe sysctl by prefix", node: node(), pod: pod("a", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "net.core.somaxconn", Value: "1"}}}
		}), want: admission.Result{Admit: true}},
		{name: "safe net sysctl with host network", node: node(), pod: pod("a", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "1"}}}
		}), want: admission.Result{Reason: "SysctlForbidden", Message: `forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled`}},
		{name: "BestEffort under memory pressure", node: node(), pod: pod("a"), pressure: func() (bool, bool, bool) { return true, false, false },
			want: admission.Result{Reason: "Evicted", Message: "The node had condition: [MemoryPressure]. "}},
		{name: "Burstable under memory pressure", node: node(), pod: pod("a", requests("100m", "")), pressure: func() (bool, bool, bool) { return true, false, false },
			want: admission.Result{Admit: true}},
		{name: "BestEffort tolerating memory pressure", node: node(), pressure: func() (bool, bool, bool) { return true, false, false },
			pod: pod("a", func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
			}), want: admission.Result{Admit: true}},
		{name: "disk pressure refuses every pod", node: node(), pod: pod("a", requests("100m", "")), pressure: func() (bool, bool, bool) { return false, true, false },
			want: admission.Result{Reason: "Evicted", Message: "The node had condition: [DiskPressure]. "}},
		{name: "memory and PID pressure", node: node(), pod: pod("a", requests("100m", "")), pressure: func() (bool, bool, bool) { return true, false, true },
			want: admission.Result{Reason: "Evicted", Message: "The node had condition: [MemoryPressure PIDPressure]. "}},
		{name: "critical pod under disk pressure", node: node(), pod: pod("a", static), pressure: func() (bool, bool, bool) { return false, true, false },
			want: admission.Result{Admit: true}},
		{name: "pressure comes first", node: node(), pod: pod("a", requests("8", "")), pressure: func() (bool, bool, bool) { return false, true, false },
			want: admission.Result{Reason: "Evicted", Message: "The node had condition: [DiskPressure]. "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chain, err := admission.Defaults(admission.Options{Pressure: tc.pressure, AllowedUnsafeSysctls: []string{"net.core.*"}})
			if err != nil {
				t.Fatal(err)
			}
			got := chain.Admit(admission.Attributes{Pod: tc.pod, OtherPods: tc.others, Node: tc.node})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Admit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewSysctlsInvalid(t *testing.T) {
	for _, p := range []string{"", "net.*.x", "vm.swappiness"} {
		if _, err := admission.NewSysctls([]string{p}); err == nil {
			t.Errorf("NewSysctls(%q) = nil error, want one", p)
		}
	}
}

func TestChainFirstRejectionWins(t *testing.T) {
	reject := func(r string) admission.Handler {
		return admission.HandlerFunc(func(admission.Attributes) admission.Result { return admission.Result{Reason: r} })
	}
	got := admission.Chain{admission.HandlerFunc(admission.NodeName), reject("First"), reject("Second")}.Admit(admission.Attributes{Pod: pod("a")})
	if got.Reason != "First" {
		t.Errorf("reason %q, want First", got.Reason)
	}
}

// BenchmarkDefaults admits one pod against 109 others on a node with
// allocatable, labels, taints and host ports in use: the work the agent
// does per added pod on a full node.
func BenchmarkDefaults(b *testing.B) {
	chain, err := admission.Defaults(admission.Options{})
	if err != nil {
		b.Fatal(err)
	}
	n := node(func(n *v1.Node) {
		n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("110")
		n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("64")
		n.Status.Allocatable[v1.ResourceMemory] = resource.MustParse("64Gi")
		n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoExecute}}
	})
	var others []*v1.Pod
	for i := range 109 {
		others = append(others, pod(fmt.Sprintf("p%d", i), requests("100m", "10Mi"), func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: int32(10000 + i)}}
			p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}}
		}))
	}
	p := pod("new", requests("100m", "10Mi"), func(p *v1.Pod) {
		p.Spec.NodeSelector = map[string]string{"zone": "a"}
		p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}}
	})
	b.ReportAllocs()
	for b.Loop() {
		if r := chain.Admit(admission.Attributes{Pod: p, OtherPods: others, Node: n}); !r.Admit {
			b.Fatal(r)
		}
	}
}
