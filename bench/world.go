package bench

import (
	"fmt"
	"os"
	"time"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/report"
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

// JoinWorld initialises MPI (the caller's goroutine must be locked to the
// main OS thread) and describes this rank.
func JoinWorld() (*World, error) {
	if err := mpi.Init(); err != nil {
		return nil, fmt.Errorf("MPI init: %w", err)
	}
	w := &World{Comm: mpi.World()}
	w.Rank, w.Size = w.Comm.Rank(), w.Comm.Size()
	local, err := w.Comm.SplitShared()
	if err != nil {
		w.Leave()
		return nil, fmt.Errorf("MPI node-local communicator: %w", err)
	}
	w.Local = local
	w.LocalRank, w.LocalSize = local.Rank(), local.Size()
	if w.Host, err = mpi.ProcessorName(); err != nil {
		w.Host, _ = os.Hostname()
	}
	return w, nil
}

// Leave ends MPI cleanly: every rank must call it.
func (w *World) Leave() {
	if w != nil && w.Local != nil {
		_ = w.Local.Free()
		w.Local = nil
	}
	if mpi.Initialized() && !mpi.Finalized() {
		_ = mpi.Finalize()
	}
}

// AllArrive is a barrier over every rank that gives up after wait.
func (w *World) AllArrive(wait time.Duration) bool {
	r, err := w.Comm.Ibarrier()
	if err != nil {
		return false
	}
	pending, err := (&mpi.Poller{}).Wait([]*mpi.Request{r}, time.Now().Add(wait))
	return err == nil && len(pending) == 0
}

// Platform is one rank's backend with what surrounds it: kernel timing, the
// profiler region, the facts the header and the topology block report, and
// the GPU memory readings.
type Platform struct {
	Backend Backend
	// Kernel is nil when there is no kernel timing; KernelNote then says why.
	Kernel     KernelTimer
	KernelNote string
	// BeforeTimed and AfterTimed bracket exactly the timed loop
	// (cuProfilerStart/Stop for --cupti-region); nil for none.
	BeforeTimed, AfterTimed func() error
	// Profiler: -p's capture range and NVTX ranges; nil where there are none.
	Profiler *Profiler
	Topology []string              // lines printed after the header (rank 0's)
	NVLink   bool                  // every pair of the job's GPUs is linked by NVLink
	GroupMs  float64               // peer exchange time inside the set-up
	Memory   func() *report.Memory // nil on the CPU
}

// Opener sets this rank's platform up for cfg (collective: every rank opens
// its own at the same time).
type Opener func(cfg *config.Config) (*Platform, error)

// Resizer is a backend that can re-target its set-up at a shape of fewer
// tokens per rank than it was opened for (a sweep sets up once, for the
// largest): the shape's Tokens and Counts change, nothing else.
type Resizer interface {
	SetShape(s ll.Shape) error
}

// SetupError is a platform that could not be set up.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// msSince is the time since t0 in milliseconds.
func msSince(t0 time.Time) float64 { return float64(time.Since(t0).Microseconds()) / 1000 }
