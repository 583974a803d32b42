package probes

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Result is a probe's outcome: an alias of runtime.ProbeResult, the type
// the runtime reads liveness and startup results as.
type Result = runtime.ProbeResult

// Outcomes, the runtime package's values under their short names. Unknown
// is what a startup probe reports before it has run. Warning is only a
// Prober's verdict for one run: the worker records a ProbeWarning event
// with the output and counts the run as a Success.
const (
	Unknown = runtime.ProbeUnknown
	Success = runtime.ProbeSuccess
	Failure = runtime.ProbeFailure
	Warning = runtime.ProbeWarning
)

// Type is a probe's kind.
type Type string

// The three probe types.
const (
	Liveness  Type = "Liveness"
	Readiness Type = "Readiness"
	Startup   Type = "Startup"
)

// Target is what one probe run is about: the pod, the container and its
// runtime ID, and where the pod can be reached.
type Target struct {
	Pod         *v1.Pod
	Container   *v1.Container
	ContainerID string // runtime ID, without the type:// prefix
	PodIP       string
}

// Prober runs one probe once. It blocks for at most timeout. The result
// is Success, Failure or Warning (a success that records a ProbeWarning
// event); the string is the probe's output, for events and messages; err
// is set only when the probe could not be run at all.
type Prober interface {
	Probe(ctx context.Context, t Target, p *v1.Probe, timeout time.Duration) (Result, string, error)
}

// ProberFunc adapts a function to a Prober.
type ProberFunc func(ctx context.Context, t Target, p *v1.Probe, timeout time.Duration) (Result, string, error)

// Probe calls f.
func (f ProberFunc) Probe(ctx context.Context, t Target, p *v1.Probe, timeout time.Duration) (Result, string, error) {
	return f(ctx, t, p, timeout)
}
