package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Attributes is what a Handler decides on.
type Attributes struct {
	// Pod is the pod to admit. Handlers must not mutate it.
	Pod *v1.Pod
	// OtherPods are the pods already admitted and still active on the
	// node, without Pod. Handlers must not mutate them.
	OtherPods []*v1.Pod
	// Node is the node: its name, labels, taints and allocatable.
	// Handlers must not mutate it. Nil means an empty node.
	Node *v1.Node
}

// Result is a Handler's verdict.
type Result struct {
	// Admit is true when the pod may run.
	Admit bool
	// Reason is a short CamelCase word (OutOfcpu, NodeAffinity...), set
	// when Admit is false.
	Reason string
	// Message says why, in the kubelet's words, when Admit is false.
	Message string
	// Preemption, set only with Admit, lists the pods that must stop
	// for the pod to be admitted (a critical pod, see Preempting). The
	// caller stops them; a caller that cannot must not admit the pod.
	Preemption *Preemption
}

// Admitted is the Result of a handler with nothing against the pod.
var admitted = Result{Admit: true}

// Handler decides whether a pod may run on the node. Admit must not
// block for long (it runs on the agent's sync loop) and must be safe for
// concurrent use.
type Handler interface {
	Admit(attrs Attributes) Result
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(attrs Attributes) Result

// Admit implements Handler.
func (f HandlerFunc) Admit(attrs Attributes) Result { return f(attrs) }

// Chain runs its handlers in order; the first rejection wins. An empty
// Chain admits every pod. It is a Handler itself: a pod it admits
// carries the Preemption of the handler that asked for one (the last, if
// several did); a pod it refuses preempts nothing.
type Chain []Handler

// Admit implements Handler.
func (c Chain) Admit(attrs Attributes) Result {
	if attrs.Node == nil {
		attrs.Node = &v1.Node{}
	}
	res := admitted
	for _, h := range c {
		r := h.Admit(attrs)
		if !r.Admit {
			return r
		}
		if r.Preemption != nil {
			res.Preemption = r.Preemption
		}
	}
	return res
}

// Options configures Defaults.
type Options struct {
	// Pressure reports the node's pressure; the eviction manager's
	// Pressure method fits. Nil: never under pressure.
	Pressure PressureFunc
	// AllowedUnsafeSysctls are the sysctls, or "prefix.*" patterns, a pod
	// may set beyond the safe ones (the kubelet's allowedUnsafeSysctls).
	AllowedUnsafeSysctls []string
	// Preemption makes the resources check Preempting, the kubelet's
	// critical pod admission handler: a critical pod that does not fit is
	// admitted with the pods to stop in Result.Preemption, which the
	// caller must stop. False: Resources, which refuses it.
	Preemption bool
}

// Defaults returns the kubelet's admission chain, in its order:
// pressure, sysctls, OS, resources (with Options.Preemption, critical
// pods preempting), node affinity, node name, host ports, NoExecute
// taints. It returns an error for an AllowedUnsafeSysctls
// pattern that is not a valid sysctl name or prefix, naming it.
func Defaults(o Options) (Chain, error) {
	sc, err := NewSysctls(o.AllowedUnsafeSysctls)
	if err != nil {
		return nil, err
	}
	resources := HandlerFunc(Resources)
	if o.Preemption {
		resources = Preempting
	}
	return Chain{
		Pressure(o.Pressure),
		sc,
		HandlerFunc(OS),
		resources,
		HandlerFunc(NodeAffinity),
		HandlerFunc(NodeName),
		HandlerFunc(NodePorts),
		HandlerFunc(TaintToleration),
	}, nil
}

// predicateFailure is how the kubelet words a scheduler predicate that
// failed.
func predicateFailure(name, why string) Result {
	return Result{Reason: name, Message: fmt.Sprintf("Predicate %s failed: %s", name, why)}
}
