// Package ll is what the low-latency operations take and give, as
// docs/DESIGN.md defines them: the shape of a job and one rank's outputs.
// The backends (cpuref, gpu) produce them, validate checks them, bench
// runs them.
package ll

import "github.com/epbench/epbench/config"

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

// ShapeOf is the shape of cfg on rank `rank` of a job of `ranks` ranks.
func ShapeOf(cfg *config.Config, rank, ranks int) Shape {
	return Shape{Ranks: ranks, Rank: rank, Tokens: cfg.Tokens, Hidden: cfg.Hidden, TopK: cfg.TopK, Experts: cfg.Experts}
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
