package status

import (
	"cmp"
	"slices"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxTerminationMessagesLength is how many bytes of termination messages
// a pod's status holds in all: each container's share is this divided by
// the pod's containers of every kind (the kubelet's
// MaxPodTerminationMessageLogLength).
const MaxTerminationMessagesLength = 12 * 1024

// normalize returns s in the form the kubelet's status manager keeps and
// compares a status (its normalizeStatus): times in whole seconds, as the
// API server stores them; each terminated container's message cut to its
// share of MaxTerminationMessagesLength; regular and ephemeral container
// statuses in name order, init container statuses in the spec's. The
// caller's memory is never written: what needs a change is copied, and
// the rest is shared with s, so that a resync, whose status differs only
// in the runtime's nanoseconds, copies a few small structs rather than
// the whole status.
func normalize(pod *v1.Pod, s v1.PodStatus) v1.PodStatus {
	budget := messageBudget(pod)
	if t := s.StartTime; t != nil && t.Nanosecond() != 0 {
		s.StartTime = &metav1.Time{Time: t.Truncate(time.Second)}
	}
	if slices.ContainsFunc(s.Conditions, fractional) {
		s.Conditions = slices.Clone(s.Conditions)
		for i := range s.Conditions {
			second(&s.Conditions[i].LastProbeTime)
			second(&s.Conditions[i].LastTransitionTime)
		}
	}
	s.InitContainerStatuses = normalizeList(s.InitContainerStatuses, budget, func(l []v1.ContainerStatus) bool { return inSpecOrder(pod, l) }, func(l []v1.ContainerStatus) { specOrder(pod, l) })
	s.ContainerStatuses = normalizeList(s.ContainerStatuses, budget, sortedByName, sortByName)
	s.EphemeralContainerStatuses = normalizeList(s.EphemeralContainerStatuses, budget, sortedByName, sortByName)
	return s
}

func fractional(c v1.PodCondition) bool {
	return c.LastProbeTime.Nanosecond() != 0 || c.LastTransitionTime.Nanosecond() != 0
}

// normalizeList returns list with its states normalized and in order
// (ordered tells whether it is, order puts it so): list itself when
// nothing changes, else a copy of its elements that shares their unchanged
// parts.
func normalizeList(list []v1.ContainerStatus, budget int, ordered func([]v1.ContainerStatus) bool, order func([]v1.ContainerStatus)) []v1.ContainerStatus {
	normal := true
	for i := range list {
		if !normalState(&list[i].State, budget) || !normalState(&list[i].LastTerminationState, budget) {
			normal = false
			break
		}
	}
	inOrder := ordered(list)
	if normal && inOrder {
		return list
	}
	list = slices.Clone(list)
	for i := range list {
		normalizeState(&list[i].State, budget)
		normalizeState(&list[i].LastTerminationState, budget)
	}
	if !inOrder {
		order(list)
	}
	return list
}

func sortedByName(l []v1.ContainerStatus) bool { return slices.IsSortedFunc(l, byName) }
func sortByName(l []v1.ContainerStatus)        { slices.SortStableFunc(l, byName) }

// specOrder puts the init container statuses in the order of the pod's
// init containers (the kubelet's SortInitContainerStatuses); statuses of
// names not in the spec go last, in their order.
func specOrder(pod *v1.Pod, statuses []v1.ContainerStatus) {
	next := 0
	for i := range pod.Spec.InitContainers {
		for j := next; j < len(statuses); j++ {
			if statuses[j].Name == pod.Spec.InitContainers[i].Name {
				statuses[next], statuses[j] = statuses[j], statuses[next]
				next++
				break
			}
		}
	}
}

// inSpecOrder reports whether specOrder would leave statuses as they are.
func inSpecOrder(pod *v1.Pod, statuses []v1.ContainerStatus) bool {
	next := 0
	for i := range pod.Spec.InitContainers {
		if next < len(statuses) && statuses[next].Name == pod.Spec.InitContainers[i].Name {
			next++
			continue
		}
		for j := next + 1; j < len(statuses); j++ {
			if statuses[j].Name == pod.Spec.InitContainers[i].Name {
				return false
			}
		}
	}
	return true
}

func byName(a, b v1.ContainerStatus) int { return cmp.Compare(a.Name, b.Name) }

func messageBudget(pod *v1.Pod) int {
	n := len(pod.Spec.InitContainers) + len(pod.Spec.Containers) + len(pod.Spec.EphemeralContainers)
	if n == 0 {
		return MaxTerminationMessagesLength
	}
	return MaxTerminationMessagesLength / n
}

func normalState(c *v1.ContainerState, budget int) bool {
	return (c.Running == nil || c.Running.StartedAt.Nanosecond() == 0) && (c.Terminated == nil || normalTermination(c.Terminated, budget))
}

func normalTermination(t *v1.ContainerStateTerminated, budget int) bool {
	return t.StartedAt.Nanosecond() == 0 && t.FinishedAt.Nanosecond() == 0 && len(t.Message) <= budget
}

// normalizeState puts c's times in whole seconds and cuts its message,
// copying the parts it changes rather than writing them.
func normalizeState(c *v1.ContainerState, budget int) {
	if r := c.Running; r != nil && r.StartedAt.Nanosecond() != 0 {
		cp := *r
		second(&cp.StartedAt)
		c.Running = &cp
	}
	if t := c.Terminated; t != nil && !normalTermination(t, budget) {
		cp := *t
		second(&cp.StartedAt)
		second(&cp.FinishedAt)
		cp.Message = cut(cp.Message, budget)
		c.Terminated = &cp
	}
}

// second drops t's fraction of a second; a nil or zero t stays as it is.
func second(t *metav1.Time) {
	if t != nil && !t.IsZero() {
		t.Time = t.Truncate(time.Second)
	}
}

// cut returns at most n bytes of s, ending on a whole UTF-8 character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
