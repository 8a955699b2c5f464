package bench

import "github.com/epbench/epbench/ll"

// Backend runs the two LL operations on one rank. The runner (runner.go)
// owns the loop, the timing and the reductions; a backend only says how to
// dispatch, combine, mark time and hand its outputs over for validation.
// Everything a GPU backend enqueues runs in the order it was asked for (one
// stream); Sync waits for all of it.
//
// Routings: the backend prepares the inputs of every routing j in
// [0, Reroute) outside the timed region (routing j of rank r uses generator
// seed seed + r + j*ranks); Dispatch(j)/Combine(j) use routing j, and derive
// all counts and layouts from its topk_idx while they run.
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
	// Marks makes n time stamp slots, outside the timed region: four, or
	// four per pair when pairs follow each other without a sync.
	Marks(n int) error
	// Mark records time stamp slot i (0..n-1) in the order of the operations.
	Mark(i int) error
	// ElapsedUs is the time between marks, in microseconds, valid after Sync.
	ElapsedUs(from, to int) (float64, error)
	// Generation makes the dispatches that follow read the token rows of
	// generation g (routing.FillRow): 0 for ep_bench's, others for
	// validated pairs. In operation order, without a sync.
	Generation(g int) error
	// Poison fills the outputs with a NaN pattern, in operation order
	// without a sync, so that anything an operation fails to write is
	// caught by validation. With shared it also fills the symmetric areas
	// the peers write into with a pattern no flag, epoch or count equals;
	// that needs every rank between operations (the runner's barriers).
	Poison(shared bool) error
	// Snapshot starts copying this rank's outputs, as the operations
	// started so far leave them, to host memory; the function it returns
	// waits for the copy and gives them, valid until two snapshots later.
	// At most two snapshots may be outstanding.
	Snapshot() (func() (*ll.Outputs, error), error)
	// Close releases everything the backend acquired at its set-up.
	Close() error
}
