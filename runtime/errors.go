package runtime

import (
	"errors"
	"time"
)

// Error classes. Implementations wrap their errors so that errors.Is(err,
// ErrNotFound) and the like classify them whatever the transport; for
// example runtime/cri maps gRPC status codes onto these.
var (
	// ErrNotFound: the pod, sandbox, container or image does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalidArgument: the request was malformed (missing metadata,
	// bad name, bad image reference).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrAlreadyExists: a name or ID is taken.
	ErrAlreadyExists = errors.New("already exists")
	// ErrFailedPrecondition: the object is in the wrong state for the
	// operation (exec in a container that is not running).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrUnavailable: the runtime cannot be reached or is not ready.
	ErrUnavailable = errors.New("unavailable")
	// ErrDeadlineExceeded: the runtime did not answer in time.
	ErrDeadlineExceeded = errors.New("deadline exceeded")
	// ErrUnimplemented: the runtime does not implement the operation.
	ErrUnimplemented = errors.New("unimplemented")
	// ErrResourceExhausted: a limit was hit (message size, quota).
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrInvalidResponse: the runtime answered with something that does
	// not make sense (an unknown state, missing fields).
	ErrInvalidResponse = errors.New("invalid response from runtime")
)

// IsNotFound reports whether err is of class ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// BackOffError is a step refused because a back-off is running (a
// container in CrashLoopBackOff): Until is when the back-off ends and the
// step may be tried again. A caller that retries failed syncs (the pod
// workers) waits until then instead of its own delay, so a restart comes
// when the back-off allows it, not later.
type BackOffError struct {
	Err   error
	Until time.Time
}

func (e *BackOffError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *BackOffError) Unwrap() error { return e.Err }

// BackOffUntil returns the earliest Until of the BackOffErrors anywhere in
// err's tree (wrapped with %w or joined with errors.Join), and whether
// there is one. Other errors in the tree are passed over.
func BackOffUntil(err error) (time.Time, bool) {
	var until time.Time
	found := false
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *BackOffError:
			if !found || e.Until.Before(until) {
				until, found = e.Until, true
			}
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return until, found
}
