package config

import (
	"errors"
	"strconv"

	"github.com/spf13/pflag"
)

// ErrHelp is returned by Parse and ParseRouting when -h or --help is given.
// The caller prints Usage (or RoutingUsage) to stdout and exits 0.
var ErrHelp = errors.New("help requested")

// UsageError reports a command line, environment variable or configuration
// value that cannot be used. Flag names the offending input: the long flag
// name ("--num-tokens") whenever one exists, the environment variable
// ("EPBENCH_TOKENS") when the value came from there, "ranks" for the MPI
// world size, or the quoted argument for an unexpected positional argument.
type UsageError struct {
	Flag string
	Why  string
	// Bare renders "<flag> <why>" (e.g. "--ptx-dir needs the CUDA
	// backend") instead of "<flag>: <why>".
	Bare bool
}

// Error renders the error as "<flag>: <why>". The caller adds its own prefix.
func (e *UsageError) Error() string {
	if e.Bare {
		return e.Flag + " " + e.Why
	}
	return e.Flag + ": " + e.Why
}

func usageErr(flag, why string) *UsageError {
	return &UsageError{Flag: flag, Why: why}
}

// fromPflag turns whatever pflag returned into a UsageError that names the
// flag by its canonical long name, whatever spelling was typed.
// FromPflag turns an error of a pflag FlagSet into a *UsageError naming the
// flag, for other command lines built with pflag.
func FromPflag(err error) error { return fromPflag(err) }

func fromPflag(err error) error {
	var invalid *pflag.InvalidValueError
	if errors.As(err, &invalid) {
		why := "invalid value " + strconv.Quote(invalid.GetValue())
		if cause := errors.Unwrap(invalid); cause != nil {
			why = cause.Error()
		}
		return usageErr("--"+invalid.GetFlag().Name, why)
	}
	var missing *pflag.ValueRequiredError
	if errors.As(err, &missing) {
		return usageErr("--"+missing.GetFlag().Name, "requires a value")
	}
	var unknown *pflag.NotExistError
	if errors.As(err, &unknown) {
		if unknown.GetSpecifiedShortnames() != "" {
			return usageErr("-"+unknown.GetSpecifiedName(), "unknown flag")
		}
		return usageErr("--"+unknown.GetSpecifiedName(), "unknown flag")
	}
	var syntax *pflag.InvalidSyntaxError
	if errors.As(err, &syntax) {
		return usageErr(syntax.GetSpecifiedFlag(), "bad flag syntax")
	}
	return usageErr("arguments", err.Error())
}
