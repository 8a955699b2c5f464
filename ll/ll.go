// Package ll is what the low-latency operations take and give, as
// docs/DESIGN.md defines them: the shape of a job and one rank's outputs.
// The backends (cpuref, gpu) produce them, validate checks them, bench
// runs them.
package ll

import (
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/routing"
)

// Shape is what the operations' buffers are sized from.
type Shape struct {
	Ranks, Rank int
	// Tokens is the most tokens per rank (--num-tokens): the buffers are
	// sized for it, and every rank dispatches that many unless Counts says
	// otherwise.
	Tokens  int
	Hidden  int
	TopK    int
	Experts int
	// Counts, when not nil, is the tokens each rank dispatches (-l, -N),
	// [Ranks], each at most Tokens.
	Counts []int
	// RankMajor: the receive layout is rank-major (-L rm), not expert-major.
	RankMajor bool
}

// LocalExperts is E/R.
func (s Shape) LocalExperts() int { return s.Experts / s.Ranks }

// TokensOf is the tokens rank r dispatches.
func (s Shape) TokensOf(r int) int {
	if s.Counts == nil {
		return s.Tokens
	}
	return s.Counts[r]
}

// Own is the tokens this rank dispatches.
func (s Shape) Own() int { return s.TokensOf(s.Rank) }

// ShapeOf is the shape of cfg on rank `rank` of a job of `ranks` ranks.
func ShapeOf(cfg *config.Config, rank, ranks int) Shape {
	return Shape{Ranks: ranks, Rank: rank, Tokens: cfg.Tokens, Hidden: cfg.Hidden, TopK: cfg.TopK, Experts: cfg.Experts,
		Counts: cfg.RankTokens(ranks), RankMajor: cfg.Layout == config.RankMajor}
}

// Routing is rank r's topk_idx of routing j (seed: --seed), drawn for the
// tokens it dispatches as ep_bench draws it: [TokensOf(r), TopK].
func (s Shape) Routing(seed uint32, r, j int) ([]int64, error) {
	return routing.TopK(s.TokensOf(r), s.Experts, s.TopK, routing.GenSeed(seed, r, s.Ranks, j))
}

// Outputs is one rank's view of a dispatch/combine pair (docs/DESIGN.md).
type Outputs struct {
	RecvX       []uint16 // [L, R*T, H] bf16 bits (BF16 dispatch); rank-major [R, T, H]
	RecvFP8     []uint8  // [L, R*T, H] E4M3 bytes (FP8 dispatch); rank-major [R, T, H]
	RecvScales  []float32
	RecvCount   []int32  // [L]; rank-major: [R] tokens received from each source rank
	SrcInfo     []int32  // [L, R*T]; rank-major [R, T]: the source token of each slot
	LayoutRange []int64  // [L, R] begin<<32 | count
	Out         []uint16 // [Own, H] bf16 bits, the combine output
	// Rank-major only: per slot (source rank s, m-th token of s received),
	// [R, T, K], the token's top-k experts as this rank's local experts (-1
	// elsewhere) and its top-k weights; the slots from RecvCount[s] on are
	// not written.
	RecvTopkIdx     []int32
	RecvTopkWeights []float32
}
