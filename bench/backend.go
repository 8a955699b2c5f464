package bench

import "github.com/epbench/epbench/ll"

// Backend runs the two LL operations on one rank. The runner (runner.go)
// owns the loop, the timing and the reductions; a backend only says how to
// dispatch, combine, mark time and hand its outputs over for validation.
//
// Routings: Setup prepares the inputs of every routing j in [0, Reroute)
// outside the timed region (routing j of rank r uses generator seed
// seed + r + j*ranks); Dispatch(j)/Combine(j) use routing j, and derive all
// counts and layouts from its topk_idx while they run.
type Backend interface {
	// Name is "cpu" or "cuda".
	Name() string
	// Dispatch starts (GPU: enqueues) the dispatch of routing j.
	Dispatch(j int) error
	// Combine starts the combine of routing j; it consumes the dispatch's
	// output as the expert outputs.
	Combine(j int) error
	// Sync waits until everything started has finished.
	Sync() error
	// Mark records time stamp slot i (0..3) in the order of the operations.
	Mark(i int) error
	// ElapsedUs is the time between marks, in microseconds, valid after Sync.
	ElapsedUs(from, to int) (float64, error)
	// Poison fills the outputs with a NaN pattern, so that anything an
	// operation fails to write is caught by validation.
	Poison() error
	// Outputs copies this rank's current outputs to host memory.
	Outputs() (*ll.Outputs, error)
	// Close releases everything Setup acquired.
	Close() error
}
