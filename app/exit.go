package app

import (
	"errors"
	"fmt"
	"io"
)

// Exit codes, one table for the whole tool (README "Exit codes").
const (
	ExitOK         = 0 // success
	ExitRuntime    = 1 // runtime error
	ExitUsage      = 2 // usage error: bad flag or value
	ExitValidation = 3 // validation failed
	ExitTimeout    = 4 // a peer did not arrive in time
)

// ExitError carries the exit code an error ends the process with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Usage wraps err as a usage error (exit 2).
func Usage(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// Runtime wraps err as a runtime error (exit 1).
func Runtime(err error) error { return &ExitError{Code: ExitRuntime, Err: err} }

// Usagef formats a usage error.
func Usagef(format string, a ...any) error { return Usage(fmt.Errorf(format, a...)) }

// Runtimef formats a runtime error.
func Runtimef(format string, a ...any) error { return Runtime(fmt.Errorf(format, a...)) }

// CodeOf is the exit code for err: 0 for nil, the wrapped code for an
// *ExitError, 1 for anything else.
func CodeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitRuntime
}

// Report prints err as the tool's one error line.
func Report(w io.Writer, err error) {
	if err == nil {
		return
	}
	fmt.Fprintf(w, "epbench: error: %v\n", err)
}
