package cupti

import (
	"errors"
	"fmt"
)

// Sentinels; test them with errors.Is.
var (
	// ErrLibraryNotFound: no CUPTI library could be opened. The error lists
	// every place tried.
	ErrLibraryNotFound = errors.New("cupti: CUPTI library not found")
	// ErrMissingSymbol: the library opened lacks CUPTI entry points, so it is
	// not CUPTI (or is too old).
	ErrMissingSymbol = errors.New("cupti: library lacks CUPTI entry points")
	// ErrUnsupportedVersion: cuptiGetVersion reports a CUPTI older than the
	// kernel-record layout this package reads.
	ErrUnsupportedVersion = errors.New("cupti: CUPTI version not supported")
	// ErrInUse: another Collector is open; CUPTI activity state is per
	// process, so there can be only one.
	ErrInUse = errors.New("cupti: a collector is already open in this process")
	// ErrClosed: the Collector was closed.
	ErrClosed = errors.New("cupti: collector closed")
	// ErrNotStarted: Stop without a matching Start.
	ErrNotStarted = errors.New("cupti: collector not started")
	// ErrAlreadyStarted: Start twice without Stop.
	ErrAlreadyStarted = errors.New("cupti: collector already started")
	// ErrCountMismatch: the dispatch or combine kernel records differ in
	// number from the launches made, so an average would mean something else.
	ErrCountMismatch = errors.New("cupti: kernel record count differs from launches")
	// ErrDropped: CUPTI dropped activity records during the window.
	ErrDropped = errors.New("cupti: activity records dropped")
	// ErrIncomplete: kernel records arrived without an end timestamp (the
	// device was not synchronized before Stop) or a buffer could not be read.
	ErrIncomplete = errors.New("cupti: incomplete activity records")
)

// Error is a failed CUPTI call.
type Error struct {
	Call    string // the CUPTI function, e.g. "cuptiActivityEnable"
	Code    int    // its CUptiResult
	Name    string // cuptiGetResultString of Code, or this package's name for it
	Message string // cuptiGetErrorMessage of Code (CUDA 12.5 and later), or ""
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cupti: %s: %s (%d)", e.Call, e.Name, e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	if h := resultHints[e.Code]; h != "" {
		s += " (" + h + ")"
	}
	return s
}

// CUptiResult values given names or hints here; the rest are named by the
// library itself.
const (
	resultNotInitialized      = 15
	resultMultipleSubscribers = 39
)

// resultNames names results when the library cannot (cuptiGetResultString
// missing or failing).
var resultNames = map[int]string{
	0:                         "CUPTI_SUCCESS",
	1:                         "CUPTI_ERROR_INVALID_PARAMETER",
	3:                         "CUPTI_ERROR_INVALID_CONTEXT",
	7:                         "CUPTI_ERROR_INVALID_OPERATION",
	8:                         "CUPTI_ERROR_OUT_OF_MEMORY",
	12:                        "CUPTI_ERROR_MAX_LIMIT_REACHED",
	14:                        "CUPTI_ERROR_NOT_COMPATIBLE",
	resultNotInitialized:      "CUPTI_ERROR_NOT_INITIALIZED",
	21:                        "CUPTI_ERROR_INVALID_KIND",
	27:                        "CUPTI_ERROR_NOT_SUPPORTED",
	resultMultipleSubscribers: "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
	999:                       "CUPTI_ERROR_UNKNOWN",
}

var resultHints = map[int]string{
	resultNotInitialized:      "is this CUPTI newer than the driver?",
	resultMultipleSubscribers: "another CUPTI client, such as nsys, ncu, compute-sanitizer or a framework profiler, is attached to this process",
}

func newError(call string, code int, name, message string) *Error {
	if name == "" {
		name = resultNames[code]
	}
	if name == "" {
		name = "CUPTI error"
	}
	return &Error{Call: call, Code: code, Name: name, Message: message}
}
