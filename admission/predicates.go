package admission

import (
	"fmt"
	goruntime "runtime"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nodekit/nodekit/internal/podutil"
)

// The kubelet's reasons for a pod that does not fit.
const (
	ReasonOutOfCPU              = "OutOfcpu"
	ReasonOutOfMemory           = "OutOfmemory"
	ReasonOutOfEphemeralStorage = "OutOfephemeral-storage"
	ReasonOutOfPods             = "OutOfpods"
	// ReasonPrefixOutOf starts the reason of every resource shortage:
	// "OutOf" and the resource's name.
	ReasonPrefixOutOf = "OutOf"

	ReasonNodeAffinity    = "NodeAffinity"
	ReasonNodeName        = "NodeName"
	ReasonNodePorts       = "NodePorts"
	ReasonTaintToleration = "TaintToleration"

	ReasonOSSelectorMismatch = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonOSNotSupported     = "PodOSNotSupported"
)

// OS refuses a pod whose kubernetes.io/os label or spec.os names another
// operating system than the one nodekit runs on.
func OS(a Attributes) Result {
	if want, ok := a.Pod.Labels[v1.LabelOSStable]; ok {
		have := a.Node.Labels[v1.LabelOSStable]
		if have != goruntime.GOOS {
			have = goruntime.GOOS
		}
		if want != have {
			return Result{Reason: ReasonOSSelectorMismatch, Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
		}
	}
	if a.Pod.Spec.OS != nil && string(a.Pod.Spec.OS.Name) != goruntime.GOOS {
		return Result{Reason: ReasonOSNotSupported, Message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	return admitted
}

// Resources refuses a pod whose requests, added to the other pods', do
// not fit the node's allocatable: the pod count first, then cpu, memory,
// ephemeral-storage, then extended resources by name. A resource the
// allocatable does not name is not checked.
func Resources(a Attributes) Result {
	if short := shortages(a, false); len(short) > 0 {
		return short[0].result()
	}
	return admitted
}

// shortage is a resource the pod does not fit in, in the kubelet's
// units (millicores for cpu, else the value).
type shortage struct {
	name                      v1.ResourceName
	requested, used, capacity int64
}

// amount is how much is missing: the kubelet's GetInsufficientAmount.
func (s shortage) amount() int64 { return s.requested - (s.capacity - s.used) }

func (s shortage) result() Result {
	return Result{
		Reason:  ReasonPrefixOutOf + string(s.name),
		Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", s.name, s.requested, s.used, s.capacity),
	}
}

// shortages lists the resources the pod does not fit in, in Resources'
// order: the first only, or all of them.
func shortages(a Attributes, all bool) []shortage {
	alloc := a.Node.Status.Allocatable
	if len(alloc) == 0 {
		return nil
	}
	var out []shortage
	if q, ok := alloc[v1.ResourcePods]; ok {
		if int64(len(a.OtherPods))+1 > q.Value() {
			out = append(out, shortage{v1.ResourcePods, 1, int64(len(a.OtherPods)), q.Value()})
			if !all {
				return out
			}
		}
	}
	req := resourcehelper.PodRequests(a.Pod, resourcehelper.PodResourcesOptions{})
	order := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}
	var extended []v1.ResourceName
	for name := range req {
		switch name {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods:
		default:
			extended = append(extended, name)
		}
	}
	sort.Slice(extended, func(i, j int) bool { return extended[i] < extended[j] })
	// Only what the pod asks for and the node names is checked, so only
	// that is summed over the other pods.
	var names []v1.ResourceName
	for _, name := range append(order, extended...) {
		if _, ok := alloc[name]; ok && amount(req, name) > 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return out
	}
	used := make([]int64, len(names))
	for _, p := range a.OtherPods {
		addRequests(used, names, p)
	}
	for i, name := range names {
		r, u, c := amount(req, name), used[i], amount(alloc, name)
		if r > c-u {
			out = append(out, shortage{name, r, u, c})
			if !all {
				return out
			}
		}
	}
	return out
}

// addRequests adds the pod's requests of names to used, in the kubelet's
// units, as the scheduler counts a pod: its total (k8s.io/component-
// helpers' PodRequests) rounded up. A pod of plain containers, the most
// common, is summed without building its resource list.
func addRequests(used []int64, names []v1.ResourceName, p *v1.Pod) {
	if len(p.Spec.InitContainers) > 0 || len(p.Spec.Overhead) > 0 || p.Spec.Resources != nil {
		reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		for i, name := range names {
			used[i] += amount(reqs, name)
		}
		return
	}
	for i, name := range names {
		var sum resource.Quantity
		for j := range p.Spec.Containers {
			if q, ok := p.Spec.Containers[j].Resources.Requests[name]; ok {
				sum.Add(q)
			}
		}
		if name == v1.ResourceCPU {
			used[i] += sum.MilliValue()
		} else {
			used[i] += sum.Value()
		}
	}
}

// amount is l's quantity of name in the kubelet's units: millicores for
// cpu, else the value; 0 when absent.
func amount(l v1.ResourceList, name v1.ResourceName) int64 {
	q, ok := l[name]
	if !ok {
		return 0
	}
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// NodeAffinity refuses a pod whose spec.nodeSelector or required node
// affinity does not match the node's labels.
func NodeAffinity(a Attributes) Result {
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(a.Pod).Match(a.Node); !ok {
		return predicateFailure(ReasonNodeAffinity, "node(s) didn't match Pod's node affinity/selector")
	}
	return admitted
}

// NodeName refuses a pod whose spec.nodeName names another node.
func NodeName(a Attributes) Result {
	if a.Pod.Spec.NodeName != "" && a.Pod.Spec.NodeName != a.Node.Name {
		return predicateFailure(ReasonNodeName, "node(s) didn't match the requested node name")
	}
	return admitted
}

// NodePorts refuses a pod that asks for a host port another pod holds:
// same protocol and port, and the same host IP or either one unset or
// 0.0.0.0.
func NodePorts(a Attributes) Result {
	type key struct {
		proto v1.Protocol
		port  int32
	}
	inUse := map[key][]string{}
	for _, p := range a.OtherPods {
		for _, hp := range hostPorts(p) {
			k := key{hp.Protocol, hp.HostPort}
			inUse[k] = append(inUse[k], hostIP(hp))
		}
	}
	for _, hp := range hostPorts(a.Pod) {
		for _, ip := range inUse[key{hp.Protocol, hp.HostPort}] {
			mine := hostIP(hp)
			if ip == mine || ip == "0.0.0.0" || mine == "0.0.0.0" {
				return predicateFailure(ReasonNodePorts, "node(s) didn't have free ports for the requested pod ports")
			}
		}
	}
	return admitted
}

func hostIP(p v1.ContainerPort) string {
	if p.HostIP == "" {
		return "0.0.0.0"
	}
	return p.HostIP
}

// hostPorts lists the host ports of a pod's containers and init
// containers, with the protocol defaulted to TCP.
func hostPorts(p *v1.Pod) []v1.ContainerPort {
	var out []v1.ContainerPort
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, port := range c.Ports {
				if port.HostPort <= 0 {
					continue
				}
				if port.Protocol == "" {
					port.Protocol = v1.ProtocolTCP
				}
				out = append(out, port)
			}
		}
	}
	return out
}

// TaintToleration refuses a pod that does not tolerate one of the node's
// NoExecute taints. Static pods are exempt, and NoSchedule taints are not
// checked: both as the kubelet does.
func TaintToleration(a Attributes) Result {
	if podutil.IsStatic(a.Pod) {
		return admitted
	}
	noExecute := func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }
	if _, untolerated := corev1.FindMatchingUntoleratedTaint(logr.Discard(), a.Node.Spec.Taints, a.Pod.Spec.Tolerations, noExecute, false); untolerated {
		return predicateFailure(ReasonTaintToleration, "node(s) had taints that the pod didn't tolerate")
	}
	return admitted
}

// joinNames is "[A B]", the way the kubelet prints a list of conditions.
func joinNames(names []string) string { return "[" + strings.Join(names, " ") + "]" }
