package app

import (
	"fmt"
	"os"

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

// abortMPI ends the whole job from one rank, for errors the other ranks may
// not see (they would otherwise wait for this one forever).
func abortMPI(w *World, code int, err error) {
	if w != nil && w.Size > 1 {
		fmt.Fprintf(os.Stderr, "epbench: error: rank %d: %v\n", w.Rank, err)
		mpi.Abort(code)
	}
}
