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
// caller's slices are never written: a status that needs a change is
// copied first, and copied reports it.
func normalize(pod *v1.Pod, s v1.PodStatus) (_ v1.PodStatus, copied bool) {
	budget := messageBudget(pod)
	if !needsNormalizing(pod, &s, budget) {
		return s, false
	}
	s = *s.DeepCopy()
	second(s.StartTime)
	for i := range s.Conditions {
		second(&s.Conditions[i].LastProbeTime)
		second(&s.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			normalizeState(&list[i].State, budget)
			normalizeState(&list[i].LastTerminationState, budget)
		}
	}
	slices.SortStableFunc(s.ContainerStatuses, byName)
	slices.SortStableFunc(s.EphemeralContainerStatuses, byName)
	specOrder(pod, s.InitContainerStatuses)
	return s, true
}

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

// needsNormalizing reports whether normalize would change s, so that a
// status already normal (the usual resync) costs no copy.
func needsNormalizing(pod *v1.Pod, s *v1.PodStatus, budget int) bool {
	if s.StartTime != nil && s.StartTime.Nanosecond() != 0 {
		return true
	}
	for i := range s.Conditions {
		if s.Conditions[i].LastProbeTime.Nanosecond() != 0 || s.Conditions[i].LastTransitionTime.Nanosecond() != 0 {
			return true
		}
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			if !normalState(&list[i].State, budget) || !normalState(&list[i].LastTerminationState, budget) {
				return true
			}
		}
	}
	return !slices.IsSortedFunc(s.ContainerStatuses, byName) || !slices.IsSortedFunc(s.EphemeralContainerStatuses, byName) ||
		!inSpecOrder(pod, s.InitContainerStatuses)
}

func normalState(c *v1.ContainerState, budget int) bool {
	if c.Running != nil && c.Running.StartedAt.Nanosecond() != 0 {
		return false
	}
	if t := c.Terminated; t != nil {
		return t.StartedAt.Nanosecond() == 0 && t.FinishedAt.Nanosecond() == 0 && len(t.Message) <= budget
	}
	return true
}

func normalizeState(c *v1.ContainerState, budget int) {
	if c.Running != nil {
		second(&c.Running.StartedAt)
	}
	if t := c.Terminated; t != nil {
		second(&t.StartedAt)
		second(&t.FinishedAt)
		t.Message = cut(t.Message, budget)
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
