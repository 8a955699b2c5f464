package mpi

// #cgo pkg-config: ompi
// #include "epmpi.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"
)

// Life cycle of the library in this process; MPI allows exactly one
// Init/Finalize pair.
const (
	stateNew int32 = iota
	stateReady
	stateFinalized
)

var state atomic.Int32

// ready reports whether MPI calls may be made now.
func ready() error {
	switch state.Load() {
	case stateReady:
		return nil
	case stateFinalized:
		return ErrFinalized
	}
	return ErrNotInitialized
}

// Init initializes MPI with thread level MPI_THREAD_FUNNELED: only the
// thread that called Init may make MPI calls afterwards. Go moves goroutines
// between threads, so the caller must hold runtime.LockOSThread on the
// calling goroutine before Init and make every later call from that
// goroutine. Init fails if the library cannot provide that level.
//
// World and every communicator derived from it return errors as values
// (MPI_ERRORS_RETURN) instead of aborting the job.
func Init() error {
	switch state.Load() {
	case stateReady:
		return ErrAlreadyInitialized
	case stateFinalized:
		return ErrFinalized
	}
	var flag C.int
	if err := check("MPI_Initialized", C.MPI_Initialized(&flag)); err != nil {
		return err
	}
	if flag != 0 {
		return fmt.Errorf("%w by other code in this process", ErrAlreadyInitialized)
	}
	var provided C.int
	if err := check("MPI_Init_thread", C.MPI_Init_thread(nil, nil, C.MPI_THREAD_FUNNELED, &provided)); err != nil {
		return err
	}
	state.Store(stateReady)
	if provided < C.MPI_THREAD_FUNNELED {
		err := fmt.Errorf("mpi: Init: library provides thread level %d, MPI_THREAD_FUNNELED (%d) is required",
			int(provided), int(C.MPI_THREAD_FUNNELED))
		return errors.Join(err, Finalize())
	}
	w, err := newComm(C.epmpi_comm_world())
	if err != nil {
		return errors.Join(err, Finalize())
	}
	w.world = true
	*world = *w
	return nil
}

// Initialized reports whether MPI_Init has been called in this process, by
// this package or otherwise. Like MPI_Initialized it stays true after
// Finalize.
func Initialized() bool {
	var flag C.int
	return C.MPI_Initialized(&flag) == C.MPI_SUCCESS && flag != 0
}

// Finalized reports whether MPI_Finalize has completed in this process.
func Finalized() bool {
	var flag C.int
	return C.MPI_Finalized(&flag) == C.MPI_SUCCESS && flag != 0
}

// Finalize shuts MPI down. It must be called from the Init thread after all
// ranks have completed their communication. Requests still in flight are
// released (their buffers unpinned) and reported in the returned error.
func Finalize() error {
	if err := ready(); err != nil {
		return err
	}
	err := check("MPI_Finalize", C.MPI_Finalize())
	state.Store(stateFinalized)
	*world = Comm{rank: -1, world: true}
	if n := releaseInflight(); n > 0 {
		err = errors.Join(err, fmt.Errorf("mpi: Finalize: %d non-blocking requests were never completed", n))
	}
	return err
}

// Abort terminates every process of the job with the given exit code
// (MPI_Abort on World). Without an initialized MPI it exits this process.
func Abort(code int) {
	if state.Load() == stateReady {
		C.MPI_Abort(C.epmpi_comm_world(), C.int(code))
	}
	os.Exit(code)
}

// Wtime returns MPI_Wtime, seconds since an arbitrary point in the past. It
// returns 0 when MPI is not initialized.
func Wtime() float64 {
	if ready() != nil {
		return 0
	}
	return float64(C.MPI_Wtime())
}

// ProcessorName returns MPI_Get_processor_name, normally the host name.
func ProcessorName() (string, error) {
	if err := ready(); err != nil {
		return "", err
	}
	var buf [C.MPI_MAX_PROCESSOR_NAME]C.char
	var n C.int
	if err := check("MPI_Get_processor_name", C.MPI_Get_processor_name(&buf[0], &n)); err != nil {
		return "", err
	}
	return C.GoStringN((*C.char)(unsafe.Pointer(&buf[0])), n), nil
}
