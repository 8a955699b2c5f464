package nccl

import (
	"errors"
	"fmt"
	"time"
)

// Sentinels; test them with errors.Is.
var (
	// ErrNotFound: no libnccl could be opened. The wrapping error says where
	// Load looked and how to point epbench at a library.
	ErrNotFound = errors.New("nccl: libnccl not found")
	// ErrMissingSymbol: the library lacks entry points epbench calls; the
	// wrapping error names them and the library.
	ErrMissingSymbol = errors.New("nccl: library lacks NCCL entry points epbench calls")
	// ErrClosed: a call on a Lib after its Close.
	ErrClosed = errors.New("nccl: library closed")
	// ErrInUse: Close while communicators made from the Lib are not destroyed.
	ErrInUse = errors.New("nccl: communicators still open")
	// ErrDestroyed: a call on a Comm after its Destroy.
	ErrDestroyed = errors.New("nccl: communicator destroyed")
	// ErrNoSymmetricMemory: ncclCommWindowRegister succeeded without a
	// window, which NCCL does when the communicator has no symmetric
	// memory (its ranks are neither one LSA team nor all reachable
	// through GIN, or NCCL_WIN_ENABLE/NCCL_CUMEM_ENABLE turned it off).
	ErrNoSymmetricMemory = errors.New("nccl: NCCL registered no symmetric window: this communicator has no symmetric memory " +
		"(needs its ranks in one NVLink domain or GIN between them, CUDA P2P among the ranks of a node, and NCCL_WIN_ENABLE and NCCL_CUMEM_ENABLE left on)")
	// ErrNoWindow: a zero Window, one RegisterWindow did not return.
	ErrNoWindow = errors.New("nccl: zero window")
)

// buildHint ends the messages of ErrNotFound from Load and of VersionError.
const buildHint = "scripts/nccl.sh builds one from an NCCL source tree"

// Error is a failed NCCL call.
type Error struct {
	Call string // the NCCL function, e.g. "ncclCommInitRankConfig"
	Code int    // its ncclResult_t
	// Msg is ncclGetErrorString of Code followed, in parentheses, by
	// ncclGetLastError's text when the library had any.
	Msg string
}

func (e *Error) Error() string {
	return e.Call + ": " + e.Msg
}

// TimeoutError: a collective step of a non-blocking communicator did not
// complete within the communicator's timeout, and the communicator was
// aborted. NCCL itself waits without bound for the other ranks of such a
// step, so most likely another rank failed or stalled in it.
type TimeoutError struct {
	Call  string        // the NCCL function that started the step, e.g. "ncclCommInitRankConfig"
	After time.Duration // the bound that passed
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s did not complete within %d ms (another rank probably failed or stalled in it); communicator aborted",
		e.Call, e.After.Milliseconds())
}

// PeerTimeout marks the error as a peer that did not arrive (exit code 4).
func (e *TimeoutError) PeerTimeout() bool { return true }

// VersionError: the library found is older than MinVersion.
type VersionError struct {
	Path        string  // the library, as the loader resolved it
	Found, Need Version // its version, and the oldest one accepted
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("nccl: found NCCL %s at %s; %s or newer is needed (%s)", e.Found, e.Path, e.Need, buildHint)
}
