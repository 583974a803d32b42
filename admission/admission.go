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
// Chain admits every pod. It is a Handler itself.
type Chain []Handler

// Admit implements Handler.
func (c Chain) Admit(attrs Attributes) Result {
	if attrs.Node == nil {
		attrs.Node = &v1.Node{}
	}
	for _, h := range c {
		if r := h.Admit(attrs); !r.Admit {
			return r
		}
	}
	return admitted
}

// Options configures Defaults.
type Options struct {
	// Pressure reports the node's pressure; the eviction manager's
	// Pressure method fits. Nil: never under pressure.
	Pressure PressureFunc
	// AllowedUnsafeSysctls are the sysctls, or "prefix.*" patterns, a pod
	// may set beyond the safe ones (the kubelet's allowedUnsafeSysctls).
	AllowedUnsafeSysctls []string
}

// Defaults returns the kubelet's admission chain, in its order:
// pressure, sysctls, OS, resources, node affinity, node name, host ports,
// NoExecute taints. It returns an error for an AllowedUnsafeSysctls
// pattern that is not a valid sysctl name or prefix, naming it.
func Defaults(o Options) (Chain, error) {
	sc, err := NewSysctls(o.AllowedUnsafeSysctls)
	if err != nil {
		return nil, err
	}
	return Chain{
		Pressure(o.Pressure),
		sc,
		HandlerFunc(OS),
		HandlerFunc(Resources),
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
