package bench

import "github.com/epbench/epbench/config"

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
	Outputs() (*Outputs, error)
	// Close releases everything Setup acquired.
	Close() error
}

// Outputs is one rank's view of a dispatch/combine pair (docs/DESIGN.md).
type Outputs struct {
	RecvX       []uint16 // [L, R*T, H] bf16 bits (BF16 dispatch)
	RecvFP8     []uint8  // [L, R*T, H] E4M3 bytes (FP8 dispatch)
	RecvScales  []float32
	RecvCount   []int32  // [L]
	SrcInfo     []int32  // [L, R*T]
	LayoutRange []int64  // [L, R] begin<<32 | count
	Out         []uint16 // [T, H] bf16 bits, the combine output
}

// Shape is what the operations' buffers are sized from.
type Shape struct {
	Ranks, Rank int
	Tokens      int
	Hidden      int
	TopK        int
	Experts     int
}

// LocalExperts is E/R.
func (s Shape) LocalExperts() int { return s.Experts / s.Ranks }

// ShapeOf is the shape of cfg on a job of ranks ranks.
func ShapeOf(cfg *config.Config, rank, ranks int) Shape {
	return Shape{Ranks: ranks, Rank: rank, Tokens: cfg.Tokens, Hidden: cfg.Hidden, TopK: cfg.TopK, Experts: cfg.Experts}
}
