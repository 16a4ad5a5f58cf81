package chutney

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// String is the library's constant name of the status ("CTN_ERR_SHAPE").
func (s Status) String() string { return C.GoString(C.ctn_status_name(C.ctn_status(s))) }

// Error is every error this package returns: the status, its name and the message. For a
// failed library call the message is ctn_last_error(), read in the same C call as the failing
// function (it is thread-local, and a goroutine may change OS threads between two cgo calls).
// Errors detected in Go (a closed or nil handle, a slice of the wrong length) carry the status
// the library would use.
//
// Compare with errors.Is against the sentinels: errors.Is(err, chutney.ErrShape).
type Error struct {
	Status Status
	Name   string // "CTN_ERR_SHAPE"
	Msg    string // the message after the name: "matmul: inner dimensions differ..."

	cause    error // a Go-side cause (ErrClosed), reached by errors.Is / errors.Unwrap
	sentinel bool
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Name
	}
	return e.Name + ": " + e.Msg
}

// Is reports whether target is the sentinel of e's status (ErrShape for CTN_ERR_SHAPE...).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.sentinel && t.Status == e.Status
}

// Unwrap returns the Go-side cause, if any (ErrClosed for a closed handle).
func (e *Error) Unwrap() error { return e.cause }

func sentinel(s Status) *Error { return &Error{Status: s, Name: s.String(), sentinel: true} }

// Sentinels for errors.Is, one per status code.
var (
	ErrInvalidArgument = sentinel(StatusInvalidArgument)
	ErrShape           = sentinel(StatusShape)
	ErrDType           = sentinel(StatusDType)
	ErrOutOfMemory     = sentinel(StatusOutOfMemory)
	ErrUnavailable     = sentinel(StatusUnavailable)
	ErrUnsupported     = sentinel(StatusUnsupported)
	ErrPlugin          = sentinel(StatusPlugin)
	ErrIO              = sentinel(StatusIO)
	ErrCorrupt         = sentinel(StatusCorrupt)
	ErrState           = sentinel(StatusState)
	ErrInternal        = sentinel(StatusInternal)
	ErrCancelled       = sentinel(StatusCancelled) // a run cancelled or past its deadline; variables unchanged
	ErrNumerics        = sentinel(StatusNumerics)  // RunOptions.CheckNumerics met a NaN or infinity
)

// ErrClosed is the cause of the error (status CTN_ERR_INVALID_ARGUMENT) returned when a handle
// is used after Close: errors.Is(err, chutney.ErrClosed).
var ErrClosed = errors.New("handle is closed")

// check turns a wrapped call's result into an error, freeing the copied message.
func check(r C.goctn_ret) error {
	if r.status == C.CTN_OK {
		return nil
	}
	e := &Error{Status: Status(r.status), Msg: "(no message: out of memory copying it)"}
	if r.name != nil {
		e.Name = C.GoString(r.name)
	} else {
		e.Name = e.Status.String()
	}
	if r.msg != nil {
		// ctn_last_error() reads "CTN_ERR_SHAPE: matmul: ..."; Msg keeps what follows the name.
		e.Msg = strings.TrimPrefix(C.GoString(r.msg), e.Name+": ")
		C.free(unsafe.Pointer(r.msg))
	}
	return e
}

// newError is an error detected on the Go side.
func newError(s Status, format string, args ...any) *Error {
	return &Error{Status: s, Name: s.String(), Msg: fmt.Sprintf(format, args...)}
}

func closedError(kind string) *Error {
	return &Error{Status: StatusInvalidArgument, Name: StatusInvalidArgument.String(),
		Msg: "use of a closed " + kind, cause: ErrClosed}
}

func nilError(kind string) *Error {
	return newError(StatusInvalidArgument, "nil *%s", kind)
}
