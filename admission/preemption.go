package admission

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodekit/nodekit/internal/podutil"
)

// The kubelet's words for a pod stopped to admit a critical pod.
const (
	// ReasonPreempting is the status reason, and the event reason, of a
	// preempted pod.
	ReasonPreempting = "Preempting"
	// PreemptionMessage is the status message, and the event message, of
	// a preempted pod.
	PreemptionMessage = "Preempted in order to admit critical pod"
	// PreemptionDisruptionMessage is the message of a preempted pod's
	// DisruptionTarget condition (reason TerminationByKubelet).
	PreemptionDisruptionMessage = "Pod was preempted by Kubelet to accommodate a critical pod."
	// ReasonUnexpectedAdmissionError is the reason of a critical pod
	// refused because no set of pods frees what it needs.
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
)

// Preemption is what admitting a critical pod takes: other pods to stop.
type Preemption struct {
	// Pods are the pods to stop, from Attributes.OtherPods; the caller
	// must not mutate them.
	Pods []*v1.Pod
	// Resource is the first resource the pod was short of, the
	// kubelet_preemptions counter's preemption_signal.
	Resource v1.ResourceName
}

// Preempting is Resources with the kubelet's critical pod admission
// handler: a critical pod (static, mirror, or priority at least
// SystemCriticalPriority) that does not fit, and that the node
// affinity, node name, host port and taint checks would admit (the
// checks preemption cannot help, made first, as the kubelet makes
// them), is admitted with a Preemption: the smallest set of other pods
// whose requests free what it lacks, chosen by the kubelet's rules. Only
// pods it may preempt count: those not critical, or of lower priority
// (both set). Guaranteed pods are spared most, then Burstable ones:
// the set is the BestEffort pods needed once every Burstable and
// Guaranteed pod that must go has gone, and so on; within a class the
// pod closest to what is still missing goes first (fewest pods, then the
// smaller memory and cpu requests). When no set frees enough, the pod is
// refused with ReasonUnexpectedAdmissionError. A pod that is not
// critical is refused as Resources refuses it.
//
// It decides only: the caller stops the pods (the agent records them
// Failed with ReasonPreempting, PreemptionMessage and a DisruptionTarget
// condition, and kills them with their own grace period).
func Preempting(a Attributes) Result {
	short := shortages(a, true)
	if len(short) == 0 {
		return admitted
	}
	if !IsCritical(a.Pod) {
		return short[0].result()
	}
	for _, check := range []HandlerFunc{NodeAffinity, NodeName, NodePorts, TaintToleration} {
		if r := check(a); !r.Admit {
			return r
		}
	}
	victims, err := podsToPreempt(a.Pod, a.OtherPods, short)
	if err != nil {
		return Result{
			Reason:  ReasonUnexpectedAdmissionError,
			Message: "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: " + err.Error(),
		}
	}
	return Result{Admit: true, Preemption: &Preemption{Pods: victims, Resource: short[0].name}}
}

// preemptable is the kubelet's Preemptable: a critical pod may preempt a
// pod that is not, and any pod one of lower priority when both are set.
func preemptable(preemptor, preemptee *v1.Pod) bool {
	if IsCritical(preemptor) && !IsCritical(preemptee) {
		return true
	}
	return preemptor.Spec.Priority != nil && preemptee.Spec.Priority != nil && *preemptor.Spec.Priority > *preemptee.Spec.Priority
}

// candidate is a pod that may be preempted, with its requests of the
// resources preemption looks at, in the kubelet's units, read once.
type candidate struct {
	pod *v1.Pod
	req []int64 // by the index of the resource in the names list
	ns  []v1.ResourceName
}

// request is the kubelet's GetResourceRequest: 1 for pods, millicores
// for cpu, else the value; the requests with the overhead when not zero.
func (c candidate) request(name v1.ResourceName) int64 {
	if name == v1.ResourcePods {
		return 1
	}
	for i, n := range c.ns {
		if n == name {
			return c.req[i]
		}
	}
	return 0
}

func newCandidate(p *v1.Pod, names []v1.ResourceName) candidate {
	c := candidate{pod: p, req: make([]int64, len(names)), ns: names}
	var reqs v1.ResourceList // nil: plain containers, summed directly
	if len(p.Spec.InitContainers) > 0 || p.Spec.Resources != nil {
		reqs = resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})
	}
	for i, name := range names {
		var q resource.Quantity
		if reqs != nil {
			q = reqs[name]
		} else {
			for j := range p.Spec.Containers {
				if r, ok := p.Spec.Containers[j].Resources.Requests[name]; ok {
					q.Add(r)
				}
			}
		}
		if o, ok := p.Spec.Overhead[name]; ok && !q.IsZero() {
			q.Add(o)
		}
		if name == v1.ResourceCPU {
			c.req[i] = q.MilliValue()
		} else {
			c.req[i] = q.Value()
		}
	}
	return c
}

// requirement is an amount of a resource still to free.
type requirement struct {
	name     v1.ResourceName
	quantity int64
}

type requirements []requirement

// subtract is what would still be missing once the candidates stopped.
func (rs requirements) subtract(cs ...candidate) requirements {
	var out requirements
	for _, r := range rs {
		q := r.quantity
		for _, c := range cs {
			q -= c.request(r.name)
			if q <= 0 {
				break
			}
		}
		if q > 0 {
			out = append(out, requirement{r.name, q})
		}
	}
	return out
}

// distance is how far c's requests are from covering rs: each
// requirement weighs the same whatever its size.
func (rs requirements) distance(c candidate) float64 {
	d := 0.0
	for _, r := range rs {
		if rem := float64(r.quantity - c.request(r.name)); rem > 0 {
			d += math.Pow(rem/float64(r.quantity), 2)
		}
	}
	return d
}

func (rs requirements) String() string {
	var b strings.Builder
	b.WriteString("[")
	for _, r := range rs {
		fmt.Fprintf(&b, "(res: %v, q: %d), ", r.name, r.quantity)
	}
	b.WriteString("]")
	return b.String()
}

// podsToPreempt is the kubelet's getPodsToPreempt: the pods whose
// requests free rs, sparing Guaranteed pods most, then Burstable ones.
func podsToPreempt(preemptor *v1.Pod, others []*v1.Pod, short []shortage) ([]*v1.Pod, error) {
	rs := make(requirements, 0, len(short))
	for _, s := range short {
		rs = append(rs, requirement{s.name, s.amount()})
	}
	// What the distances and the tie-break look at.
	names := []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU}
	for _, r := range rs {
		if !slices.Contains(names, r.name) && r.name != v1.ResourcePods {
			names = append(names, r.name)
		}
	}
	var bestEffort, burstable, guaranteed []candidate
	for _, p := range others {
		if !preemptable(preemptor, p) {
			continue
		}
		switch podutil.QOSClass(p) {
		case v1.PodQOSBestEffort:
			bestEffort = append(bestEffort, newCandidate(p, names))
		case v1.PodQOSBurstable:
			burstable = append(burstable, newCandidate(p, names))
		case v1.PodQOSGuaranteed:
			guaranteed = append(guaranteed, newCandidate(p, names))
		}
	}
	all := append(append(append([]candidate(nil), bestEffort...), burstable...), guaranteed...)
	if left := rs.subtract(all...); len(left) > 0 {
		return nil, fmt.Errorf("no set of running pods found to reclaim resources: %v", left)
	}
	g, err := byDistance(guaranteed, rs.subtract(append(append([]candidate(nil), bestEffort...), burstable...)...))
	if err != nil {
		return nil, err
	}
	bu, err := byDistance(burstable, rs.subtract(append(append([]candidate(nil), bestEffort...), g...)...))
	if err != nil {
		return nil, err
	}
	be, err := byDistance(bestEffort, rs.subtract(append(append([]candidate(nil), bu...), g...)...))
	if err != nil {
		return nil, err
	}
	out := make([]*v1.Pod, 0, len(be)+len(bu)+len(g))
	for _, cs := range [][]candidate{be, bu, g} {
		for _, c := range cs {
			out = append(out, c.pod)
		}
	}
	return out, nil
}

// byDistance is the kubelet's getPodsToPreemptByDistance: round after
// round, the candidate closest to what is still missing (on a tie, the
// one with smaller memory, then cpu, requests) goes, until nothing is.
func byDistance(cs []candidate, rs requirements) ([]candidate, error) {
	cs = append([]candidate(nil), cs...)
	var out []candidate
	for len(rs) > 0 {
		if len(cs) == 0 {
			return nil, errors.New("no set of running pods found to reclaim resources: " + rs.String())
		}
		best, bestDist := 0, float64(len(rs)+1)
		for i, c := range cs {
			d := rs.distance(c)
			if d < bestDist || (d == bestDist && smallerRequest(c, cs[best])) {
				best, bestDist = i, d
			}
		}
		rs = rs.subtract(cs[best])
		out = append(out, cs[best])
		cs[best] = cs[len(cs)-1]
		cs = cs[:len(cs)-1]
	}
	return out, nil
}

// smallerRequest reports whether a requests less than b: memory first,
// then cpu; true when equal, as in the kubelet.
func smallerRequest(a, b candidate) bool {
	for _, name := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		ra, rb := a.request(name), b.request(name)
		if ra < rb {
			return true
		}
		if ra > rb {
			return false
		}
	}
	return true
}
