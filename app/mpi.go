package app

import (
	"fmt"
	"os"
	"time"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/mpi"
)

// startMPI joins the MPI job; a failure is a runtime error.
func startMPI() (*bench.World, error) {
	w, err := bench.JoinWorld()
	if err != nil {
		return nil, Runtime(err)
	}
	return w, nil
}

// endAfterTimeout ends this rank after a peer did not arrive in time, with
// exit code 4 and one line naming the missing ranks and the phase. The ranks
// that are still alive time out within about timeout + bench.ReleaseGrace of
// each other; each prints its line, then they wait for each other, bounded,
// so that no rank's exit cuts another's line off. When all of them arrive,
// MPI ends normally; otherwise MPI_Abort ends the job. It does not return.
func endAfterTimeout(w *bench.World, timeout time.Duration, err error) {
	if w.Size > 1 {
		err = fmt.Errorf("rank %d: %w", w.Rank, err)
	}
	Report(os.Stderr, err)
	if w.Size > 1 && !w.AllArrive(timeout+2*bench.ReleaseGrace) {
		mpi.Abort(ExitTimeout)
	}
	w.Leave()
	os.Exit(ExitTimeout)
}

// abortMPI ends the whole job from one rank, for errors the other ranks may
// not see (they would otherwise wait for this one forever).
func abortMPI(w *bench.World, code int, err error) {
	if w != nil && w.Size > 1 {
		fmt.Fprintf(os.Stderr, "epbench: error: rank %d: %v\n", w.Rank, err)
		mpi.Abort(code)
	}
}
