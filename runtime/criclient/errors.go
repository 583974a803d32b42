package criclient

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodekit/nodekit/runtime"
)

// Error is a failed CRI call. It names the operation and the object, keeps
// the gRPC status (status.FromError and status.Code work on it), and
// matches the runtime package's error classes with errors.Is:
//
//	NotFound           runtime.ErrNotFound
//	InvalidArgument    runtime.ErrInvalidArgument
//	AlreadyExists      runtime.ErrAlreadyExists
//	FailedPrecondition runtime.ErrFailedPrecondition
//	Unavailable        runtime.ErrUnavailable
//	DeadlineExceeded   runtime.ErrDeadlineExceeded and context.DeadlineExceeded
//	Canceled           context.Canceled
//	Unimplemented      runtime.ErrUnimplemented
//	ResourceExhausted  runtime.ErrResourceExhausted
type Error struct {
	// Op is the CRI method, such as "StopContainer".
	Op string
	// ID is the object the call was about, if any.
	ID string
	// Err is the error the transport returned.
	Err error
}

func (e *Error) Error() string {
	st, _ := status.FromError(e.Err)
	what := e.Op
	if e.ID != "" {
		what += " " + e.ID
	}
	return fmt.Sprintf("cri: %s: %s: %s", what, codeText(st.Code()), st.Message())
}

func codeText(c codes.Code) string {
	switch c {
	case codes.NotFound:
		return "not found"
	case codes.InvalidArgument:
		return "invalid argument"
	case codes.AlreadyExists:
		return "already exists"
	case codes.FailedPrecondition:
		return "failed precondition"
	case codes.Unavailable:
		return "unavailable"
	case codes.DeadlineExceeded:
		return "deadline exceeded"
	case codes.Canceled:
		return "canceled"
	case codes.Unimplemented:
		return "unimplemented"
	case codes.ResourceExhausted:
		return "resource exhausted"
	}
	return "error"
}

// Unwrap returns the error classes the code maps to and the original error.
func (e *Error) Unwrap() []error {
	errs := []error{e.Err}
	switch status.Code(e.Err) {
	case codes.NotFound:
		errs = append(errs, runtime.ErrNotFound)
	case codes.InvalidArgument:
		errs = append(errs, runtime.ErrInvalidArgument)
	case codes.AlreadyExists:
		errs = append(errs, runtime.ErrAlreadyExists)
	case codes.FailedPrecondition:
		errs = append(errs, runtime.ErrFailedPrecondition)
	case codes.Unavailable:
		errs = append(errs, runtime.ErrUnavailable)
	case codes.DeadlineExceeded:
		errs = append(errs, runtime.ErrDeadlineExceeded, context.DeadlineExceeded)
	case codes.Canceled:
		errs = append(errs, context.Canceled)
	case codes.Unimplemented:
		errs = append(errs, runtime.ErrUnimplemented)
	case codes.ResourceExhausted:
		errs = append(errs, runtime.ErrResourceExhausted)
	}
	return errs
}

// GRPCStatus returns the status of the underlying error.
func (e *Error) GRPCStatus() *status.Status {
	st, _ := status.FromError(e.Err)
	return st
}

// Wrap turns the error of the CRI call op about the object id into an
// *Error; nil stays nil. It is for errors of any RuntimeService or
// ImageManagerService implementation, so that an in-process one (a
// *fakecri.Runtime returning plain gRPC status errors) classifies as
// *Client does. An *Error is returned as it is; a context error becomes
// the matching gRPC code; any other error without a gRPC status is
// wrapped with the op and id in its message, but not classified.
func Wrap(op, id string, err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	if _, ok := status.FromError(err); !ok {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			err = status.FromContextError(err).Err()
		} else {
			return fmt.Errorf("cri: %s %s: %w", op, id, err)
		}
	}
	return &Error{Op: op, ID: id, Err: err}
}

// IsNotFound reports whether err says the object is gone: an error
// matching runtime.ErrNotFound (an *Error with code NotFound among them)
// or a plain gRPC status error with code NotFound, as in-process
// implementations return.
func IsNotFound(err error) bool {
	return errors.Is(err, runtime.ErrNotFound) || status.Code(err) == codes.NotFound
}
