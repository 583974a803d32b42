package runtime

import "errors"

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
