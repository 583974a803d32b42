package cri

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// The labels and annotations the kubelet puts on sandboxes and containers.
// nodekit uses the same keys, so crictl and other CRI tools recognise the
// pods, and an agent can adopt containers a kubelet created and the other
// way round.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash             = "io.kubernetes.container.hash"
	AnnotationRestartCount              = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath    = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy  = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPodTerminationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
)

// defaultGracePeriod is the grace period when neither the spec nor the
// container's annotations give one (the API server's default).
const defaultGracePeriod = 30

func sandboxLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	l[LabelPodUID] = string(pod.UID)
	return l
}

func containerLabels(pod *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
	}
}

func containerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int) map[string]string {
	a := map[string]string{
		AnnotationContainerHash:            strconv.FormatUint(HashContainer(c), 16),
		AnnotationRestartCount:             strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		a[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	return a
}

// HashContainer returns the hash of a container spec that is recorded on
// the container when it is created; a running container whose recorded
// hash differs from its spec's is restarted. It is the FNV-64a hash of the
// spec's JSON form.
func HashContainer(c *v1.Container) uint64 {
	b, _ := json.Marshal(c)
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}
