package cri

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
// spec's JSON form, with resource quantities in canonical form so that
// "1" and "1000m" CPUs hash alike. It is safe for concurrent use.
func HashContainer(c *v1.Container) uint64 {
	if len(c.Resources.Requests)+len(c.Resources.Limits) > 0 {
		cc := *c
		cc.Resources.Requests = canonical(c.Resources.Requests)
		cc.Resources.Limits = canonical(c.Resources.Limits)
		c = &cc
	}
	e := hashEncoders.Get().(*hashEncoder)
	defer hashEncoders.Put(e)
	e.buf.Reset()
	_ = e.enc.Encode(c)
	// FNV-1a over the JSON, without the newline Encode appends, so the
	// value equals fnv64a(json.Marshal(c)).
	h := uint64(fnvOffset64)
	for _, b := range bytes.TrimSuffix(e.buf.Bytes(), []byte{'\n'}) {
		h ^= uint64(b)
		h *= fnvPrime64
	}
	return h
}

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// hashEncoder is a JSON encoder with its buffer, pooled so hashing a spec
// on every sync does not allocate them again.
type hashEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var hashEncoders = sync.Pool{New: func() any {
	e := &hashEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// canonical returns the quantities rewritten in their canonical form.
func canonical(list v1.ResourceList) v1.ResourceList {
	if list == nil {
		return nil
	}
	out := make(v1.ResourceList, len(list))
	for name, q := range list {
		number, suffix := q.CanonicalizeBytes(nil)
		out[name] = resource.MustParse(string(number) + string(suffix))
	}
	return out
}
