package cri

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// The labels and annotations the kubelet puts on sandboxes and containers.
// nodekit writes the same keys with the same values, so crictl and other
// CRI tools recognise the pods, and nodekit and a kubelet adopt each
// other's containers without restarting them.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	// AnnotationContainerHash is HashContainer of the spec, in lower-case
	// hexadecimal, as the kubelet writes and reads it.
	AnnotationContainerHash             = "io.kubernetes.container.hash"
	AnnotationRestartCount              = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath    = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy  = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPodTerminationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
)

// AnnotationSpecHash is nodekit's own annotation: SpecHash of the spec, in
// lower-case hexadecimal. The kubelet ignores it.
const AnnotationSpecHash = "io.nodekit.container.specHash"

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
		AnnotationSpecHash:                 strconv.FormatUint(SpecHash(c), 16),
		AnnotationRestartCount:             strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		a[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	return a
}

// HashContainer returns the kubelet's hash of a container spec, the value
// a kubelet records in the AnnotationContainerHash annotation and compares
// with its spec: it covers only the name and the image (the one container
// field the API lets change on a running pod). It is the 32-bit FNV-1a hash of the
// text "([]uint8)[b0 b1 ...]", where the b are the decimal bytes of the
// JSON object {"image":...,"name":...} as encoding/json writes it (keys
// sorted, HTML characters escaped); that text is how the kubelet's
// hashing helper prints the JSON bytes before hashing them. It is safe for
// concurrent use.
func HashContainer(c *v1.Container) uint64 {
	h := fnv32{h: fnvOffset32}
	h.writeString("([]uint8)[")
	h.writeDecimal(`{"image":`)
	h.writeJSONString(c.Image)
	h.writeDecimal(`,"name":`)
	h.writeJSONString(c.Name)
	h.writeDecimal(`}`)
	h.writeString("]")
	return uint64(h.h)
}

// fnv32 is an FNV-1a 32-bit hash that can take bytes as the decimal list
// fmt prints for a byte slice.
type fnv32 struct {
	h      uint32
	listed bool // a byte was written by writeDecimal
}

func (f *fnv32) writeString(s string) {
	for i := 0; i < len(s); i++ {
		f.h ^= uint32(s[i])
		f.h *= fnvPrime32
	}
}

// writeDecimal writes each byte of s as its decimal digits, separated
// from the previous one by a space.
func (f *fnv32) writeDecimal(s string) {
	var digits [4]byte
	for i := 0; i < len(s); i++ {
		d := digits[:0]
		if f.listed {
			d = append(d, ' ')
		}
		f.listed = true
		for _, b := range strconv.AppendUint(d, uint64(s[i]), 10) {
			f.h ^= uint32(b)
			f.h *= fnvPrime32
		}
	}
}

// writeJSONString is writeDecimal of s as encoding/json writes a string,
// quotes included.
func (f *fnv32) writeJSONString(s string) {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= 0x7f || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&' {
			out, _ := json.Marshal(s) // escapes and invalid UTF-8: as encoding/json decides
			f.writeDecimal(string(out))
			return
		}
	}
	f.writeDecimal(`"`)
	f.writeDecimal(s)
	f.writeDecimal(`"`)
}

const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

// SpecHash returns nodekit's hash of a container spec, recorded in the
// AnnotationSpecHash annotation: a running container created by nodekit
// whose recorded SpecHash differs from its spec's is restarted, whatever
// field changed, except its CPU and memory requests and limits, which
// are resized in place (the kubelet's hash leaves them out for the same
// reason). It is the FNV-1a 64-bit hash of the JSON form of the spec
// without its requests and limits (resource claims are kept). It is safe
// for concurrent use.
func SpecHash(c *v1.Container) uint64 {
	if len(c.Resources.Requests)+len(c.Resources.Limits) > 0 {
		cc := *c
		cc.Resources = v1.ResourceRequirements{Claims: c.Resources.Claims}
		c = &cc
	}
	return jsonHash(c)
}

// specHashWithResources is the SpecHash that earlier nodekit versions
// recorded: the whole spec, requests and limits included (quantities in
// canonical form, so "1" and "1000m" CPUs hash alike). A container that
// records it is not restarted for the change of hash alone.
func specHashWithResources(c *v1.Container) uint64 { return jsonHash(c) }

// jsonHash is FNV-1a 64 over json.Marshal(c).
func jsonHash(c *v1.Container) uint64 {
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
