package admission

import (
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	corev1 "k8s.io/component-helpers/scheduling/corev1"

	"github.com/nodekit/nodekit/internal/podutil"
)

// ReasonEvicted is the reason of a pod refused under pressure, the
// kubelet's eviction reason.
const ReasonEvicted = "Evicted"

// SystemCriticalPriority is the priority from which a pod is critical
// (the priority of system-cluster-critical).
const SystemCriticalPriority = podutil.SystemCriticalPriority

// IsCritical reports whether a pod is critical to the node, as the
// kubelet decides: a static or mirror pod, or one whose priority is at
// least SystemCriticalPriority. Critical pods are admitted under
// pressure and never evicted.
func IsCritical(pod *v1.Pod) bool { return podutil.IsCritical(pod) }

// PressureFunc reports which pressure conditions the node has. It must
// not block and must be safe for concurrent use.
type PressureFunc func() (memory, disk, pid bool)

// Pressure returns the handler that refuses pods while the node is under
// pressure: with memory pressure alone, BestEffort pods that do not
// tolerate the memory-pressure taint; with disk or PID pressure, every
// pod. Critical pods always pass. A nil f never refuses.
func Pressure(f PressureFunc) Handler {
	return HandlerFunc(func(a Attributes) Result {
		if f == nil {
			return admitted
		}
		mem, disk, pid := f()
		var conds []string
		if mem {
			conds = append(conds, string(v1.NodeMemoryPressure))
		}
		if disk {
			conds = append(conds, string(v1.NodeDiskPressure))
		}
		if pid {
			conds = append(conds, string(v1.NodePIDPressure))
		}
		if len(conds) == 0 || IsCritical(a.Pod) {
			return admitted
		}
		if mem && len(conds) == 1 {
			if podutil.QOSClass(a.Pod) != v1.PodQOSBestEffort {
				return admitted
			}
			taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
			if corev1.TolerationsTolerateTaint(logr.Discard(), a.Pod.Spec.Tolerations, taint, false) {
				return admitted
			}
		}
		return Result{Reason: ReasonEvicted, Message: fmt.Sprintf("The node had condition: %s. ", joinNames(conds))}
	})
}
