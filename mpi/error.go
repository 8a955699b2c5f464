package mpi

// #include "epmpi.h"
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Sentinels for conditions detected before any MPI call is made; test them
// with errors.Is.
var (
	// ErrNotInitialized is returned by calls made before Init.
	ErrNotInitialized = errors.New("mpi: not initialized (call mpi.Init first)")
	// ErrFinalized is returned by calls made after Finalize; MPI cannot be
	// initialized again in the same process.
	ErrFinalized = errors.New("mpi: already finalized")
	// ErrAlreadyInitialized is returned by a second Init.
	ErrAlreadyInitialized = errors.New("mpi: already initialized")
	// ErrCommFreed is returned by operations on a nil or freed communicator.
	ErrCommFreed = errors.New("mpi: communicator is nil or freed")
	// ErrDeadlineExceeded is returned by WaitDeadline when requests are still
	// pending at the deadline.
	ErrDeadlineExceeded = errors.New("mpi: deadline passed with requests pending")
)

// Error classes callers commonly branch on (values of Error.Class).
const (
	ClassBuffer   = int(C.MPI_ERR_BUFFER)
	ClassCount    = int(C.MPI_ERR_COUNT)
	ClassType     = int(C.MPI_ERR_TYPE)
	ClassTag      = int(C.MPI_ERR_TAG)
	ClassComm     = int(C.MPI_ERR_COMM)
	ClassRank     = int(C.MPI_ERR_RANK)
	ClassRoot     = int(C.MPI_ERR_ROOT)
	ClassTruncate = int(C.MPI_ERR_TRUNCATE)
	ClassArg      = int(C.MPI_ERR_ARG)
	ClassOther    = int(C.MPI_ERR_OTHER)
	ClassIntern   = int(C.MPI_ERR_INTERN)
)

// Error is a failure reported by the MPI library. It is only seen because
// every communicator this package hands out uses MPI_ERRORS_RETURN.
type Error struct {
	Code  int    // the code the MPI function returned
	Class int    // MPI_Error_class of Code, comparable with the Class* constants
	Msg   string // MPI_Error_string of Code
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (MPI error class %d, code %d)", e.Msg, e.Class, e.Code)
}

// check turns the return code of the MPI function fn into a Go error that
// wraps an *Error.
func check(fn string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	return fmt.Errorf("mpi: %s: %w", fn, newError(rc))
}

func newError(rc C.int) *Error {
	e := &Error{Code: int(rc), Class: int(rc), Msg: "unknown MPI error"}
	var class C.int
	if C.MPI_Error_class(rc, &class) == C.MPI_SUCCESS {
		e.Class = int(class)
	}
	var buf [C.MPI_MAX_ERROR_STRING]C.char
	var n C.int
	if C.MPI_Error_string(rc, &buf[0], &n) == C.MPI_SUCCESS && n > 0 {
		e.Msg = C.GoStringN((*C.char)(unsafe.Pointer(&buf[0])), n)
	}
	return e
}
