package app

import (
	"fmt"
	"os"
	"time"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/mpi"
)

// World is this process's place in the MPI job.
type World struct {
	Comm      *mpi.Comm // all ranks
	Local     *mpi.Comm // the ranks on this node
	Rank      int
	Size      int
	LocalRank int
	LocalSize int
	Host      string
}

// startMPI initialises MPI (the caller's goroutine is locked to the main OS
// thread, see main.go) and describes this rank.
func startMPI() (*World, error) {
	if err := mpi.Init(); err != nil {
		return nil, Runtimef("MPI init: %v", err)
	}
	w := &World{Comm: mpi.World()}
	w.Rank, w.Size = w.Comm.Rank(), w.Comm.Size()
	local, err := w.Comm.SplitShared()
	if err != nil {
		stopMPI(w)
		return nil, Runtimef("MPI node-local communicator: %v", err)
	}
	w.Local = local
	w.LocalRank, w.LocalSize = local.Rank(), local.Size()
	if w.Host, err = mpi.ProcessorName(); err != nil {
		w.Host, _ = os.Hostname()
	}
	return w, nil
}

// stopMPI ends MPI cleanly: every rank must call it.
func stopMPI(w *World) {
	if w != nil && w.Local != nil {
		_ = w.Local.Free()
		w.Local = nil
	}
	if mpi.Initialized() && !mpi.Finalized() {
		_ = mpi.Finalize()
	}
}

// endAfterTimeout ends this rank after a peer did not arrive in time, with
// exit code 4 and one line naming the missing ranks and the phase. The ranks
// that are still alive time out within about timeout + bench.ReleaseGrace of
// each other; each prints its line, then they wait for each other, bounded,
// so that no rank's exit cuts another's line off. When all of them arrive,
// MPI ends normally; otherwise MPI_Abort ends the job. It does not return.
func endAfterTimeout(w *World, timeout time.Duration, err error) {
	if w.Size > 1 {
		err = fmt.Errorf("rank %d: %w", w.Rank, err)
	}
	Report(os.Stderr, err)
	if w.Size > 1 && !allArrive(w, timeout+2*bench.ReleaseGrace) {
		mpi.Abort(ExitTimeout)
	}
	stopMPI(w)
	os.Exit(ExitTimeout)
}

// allArrive is a barrier over every rank that gives up after wait.
func allArrive(w *World, wait time.Duration) bool {
	r, err := w.Comm.Ibarrier()
	if err != nil {
		return false
	}
	pending, err := (&mpi.Poller{}).Wait([]*mpi.Request{r}, time.Now().Add(wait))
	return err == nil && len(pending) == 0
}

// abortMPI ends the whole job from one rank, for errors the other ranks may
// not see (they would otherwise wait for this one forever).
func abortMPI(w *World, code int, err error) {
	if w != nil && w.Size > 1 {
		fmt.Fprintf(os.Stderr, "epbench: error: rank %d: %v\n", w.Rank, err)
		mpi.Abort(code)
	}
}
