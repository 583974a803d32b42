package podutil

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourceFieldValue is what a downward-API resourceFieldRef shows for
// container c of pod (env or volume alike), as the kubelet computes it:
// the container's request or limit of cpu, memory, ephemeral-storage or
// hugepages-<size>, divided by the divisor (1 when unset) and rounded up;
// cpu counts in millicores against the divisor's millicores. A cpu,
// memory or ephemeral-storage limit the container does not set (or sets
// to zero) is the pod-level limit of cpu or memory when the pod sets one
// and the node lists that resource, else the node's allocatable amount,
// else zero; a hugepages limit is never defaulted (hugepages are not
// overcommitted). Another resource is an error.
func ResourceFieldValue(pod *v1.Pod, c *v1.Container, ref *v1.ResourceFieldSelector, allocatable v1.ResourceList) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	res := v1.ResourceName(name)
	hugePages := strings.HasPrefix(name, v1.ResourceHugePagesPrefix)
	known := res == v1.ResourceCPU || res == v1.ResourceMemory || res == v1.ResourceEphemeralStorage || hugePages
	if !ok || (kind != "limits" && kind != "requests") || !known {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	var q resource.Quantity
	if kind == "requests" {
		q = c.Resources.Requests[res]
	} else {
		q = c.Resources.Limits[res]
		if q.IsZero() && !hugePages {
			if a, ok := allocatable[res]; ok {
				q = a
				if p, ok := podLevelLimit(pod, res); ok {
					q = p
				}
			}
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if res == v1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// podLevelLimit is the pod's own limit of cpu or memory (the resources
// pod-level resources cover), when set and not zero.
func podLevelLimit(pod *v1.Pod, res v1.ResourceName) (resource.Quantity, bool) {
	if pod.Spec.Resources == nil || (res != v1.ResourceCPU && res != v1.ResourceMemory) {
		return resource.Quantity{}, false
	}
	q, ok := pod.Spec.Resources.Limits[res]
	return q, ok && !q.IsZero()
}
