package validate

import (
	"errors"
	"fmt"
	"math"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
)

// channelsPerScale is the FP8 quantisation block: one float32 scale per 128
// channels of a token.
const channelsPerScale = 128

// Input is what the expected values are computed from.
type Input struct {
	// Shape is the job; Shape.Rank is the rank whose outputs are checked.
	Shape ll.Shape
	Dtype config.DispatchDtype
	Mode  config.CombineMode
	// TopK is the topk_idx of every rank for the routing in use,
	// [Ranks, Tokens, TopK] row-major (rank 0's table first).
	TopK []int64
	// Weights is this rank's topk_weights, [Tokens, TopK] (the first
	// Shape.Own() tokens are used). Nil means routing.Weights(Shape.Rank,
	// Shape.Tokens, Shape.TopK).
	Weights []float32
	// Generation is the token rows the pair ran on (routing.FillRow): 0,
	// ep_bench's validation rows, or a high-entropy generation.
	Generation int
	// SkipCombine leaves the combine unchecked (dispatch-only runs):
	// CombineOK is then true and CalcDiff NaN. Not with Active (below).
	SkipCombine bool
	// Active, when not nil, is the mask of active ranks a combine ran with
	// (-T's masked step, one entry per rank, false for a masked rank): the
	// expected output leaves out every term a masked rank would have sent
	// (its partial, its rows), as the kernels and the CPU backend do. The
	// checked rank must be active. The dispatch is then not checked (a
	// masked rank's rows never arrive): DispatchOK is true. The combine is
	// checked even with SkipCombine's -D: the test runs a combine anyway.
	Active []bool
}

// Report is one rank's verdict.
type Report struct {
	DispatchOK bool
	CombineOK  bool
	// CalcDiff is ep_bench's calc_diff of the combine output (see the
	// package documentation); NaN when the output holds a NaN or was not
	// checked.
	CalcDiff float64
	// First describes the first failure, dispatch before combine, e.g.
	// "rank 1, expert 5 (local 1), row 3: ..." or "rank 0, token 7,
	// column 12: got ... want ...". Empty when both checks passed.
	First string
	// DispatchFailure and CombineFailure are the first failure of each
	// check, for the two report lines.
	DispatchFailure string
	CombineFailure  string
}

// Check validates one rank's outputs. It never panics: inputs of the wrong
// size make both checks fail with a message saying what was wrong.
func Check(in Input, out *ll.Outputs) Report {
	rep := Report{CalcDiff: math.NaN()}
	if err := in.check(); err != nil {
		msg := fmt.Sprintf("rank %d: %v", in.Shape.Rank, err)
		rep.DispatchFailure, rep.CombineFailure, rep.First = msg, msg, msg
		return rep
	}
	if out == nil {
		msg := fmt.Sprintf("rank %d: no outputs", in.Shape.Rank)
		rep.DispatchFailure, rep.CombineFailure, rep.First = msg, msg, msg
		return rep
	}
	if in.Weights == nil {
		w, err := routing.Weights(in.Shape.Rank, in.Shape.Tokens, in.Shape.TopK)
		if err != nil {
			msg := fmt.Sprintf("rank %d: weights: %v", in.Shape.Rank, err)
			rep.DispatchFailure, rep.CombineFailure, rep.First = msg, msg, msg
			return rep
		}
		in.Weights = w
	}
	if in.Active == nil {
		rep.DispatchFailure = checkDispatch(&in, out)
	}
	rep.DispatchOK = rep.DispatchFailure == ""
	if in.SkipCombine && in.Active == nil {
		rep.CombineOK = true
	} else {
		rep.CombineFailure, rep.CalcDiff = checkCombine(&in, out)
		rep.CombineOK = rep.CombineFailure == ""
	}
	rep.First = rep.DispatchFailure
	if rep.First == "" {
		rep.First = rep.CombineFailure
	}
	return rep
}

// check rejects shapes and tables the expected values cannot be built from.
func (in *Input) check() error {
	s := in.Shape
	switch {
	case s.Ranks < 1:
		return fmt.Errorf("ranks must be positive, got %d", s.Ranks)
	case s.Rank < 0 || s.Rank >= s.Ranks:
		return fmt.Errorf("rank %d outside [0, %d)", s.Rank, s.Ranks)
	case s.Ranks >= routing.MaxValidationRanks:
		return fmt.Errorf("%d ranks exceed the %d that validation rows can encode", s.Ranks, routing.MaxValidationRanks-1)
	case s.Tokens < 1 || s.Tokens > routing.MaxValidationTokens:
		return fmt.Errorf("tokens %d outside [1, %d]", s.Tokens, routing.MaxValidationTokens)
	case s.Hidden < routing.MinValidationHidden || s.Hidden%channelsPerScale != 0:
		return fmt.Errorf("hidden %d must be a multiple of %d and at least %d", s.Hidden, channelsPerScale, routing.MinValidationHidden)
	case s.Hidden > config.MaxHidden:
		return fmt.Errorf("hidden %d exceeds %d", s.Hidden, config.MaxHidden)
	case s.TopK < 1 || s.TopK > config.MaxTopK:
		return fmt.Errorf("top-k %d outside [1, %d]", s.TopK, config.MaxTopK)
	case s.Experts < s.Ranks || s.Experts%s.Ranks != 0 || s.Experts > config.MaxExperts:
		return fmt.Errorf("experts %d must be a multiple of the %d ranks and at most %d", s.Experts, s.Ranks, config.MaxExperts)
	case s.Ranks > math.MaxInt32/s.Tokens:
		return fmt.Errorf("%d ranks of %d tokens overflow", s.Ranks, s.Tokens)
	case s.Counts != nil && len(s.Counts) != s.Ranks:
		return fmt.Errorf("%d token counts for %d ranks", len(s.Counts), s.Ranks)
	}
	for r := 0; r < s.Ranks; r++ {
		if n := s.TokensOf(r); n < 0 || n > s.Tokens {
			return fmt.Errorf("rank %d dispatches %d tokens, outside [0, %d]", r, n, s.Tokens)
		}
	}
	switch in.Dtype {
	case config.DtypeBF16, config.DtypeFP8E4M3:
	default:
		return fmt.Errorf("unknown dispatch dtype %v", in.Dtype)
	}
	switch in.Mode {
	case config.RankLocalReduce:
	case config.DirectSend:
		if s.RankMajor {
			return errors.New(config.DirectSendRankMajor)
		}
	default:
		return fmt.Errorf("unknown combine mode %v", in.Mode)
	}
	if want := s.Ranks * s.Tokens * s.TopK; len(in.TopK) != want {
		return fmt.Errorf("topk_idx of all ranks has %d entries, want %d (%d ranks x %d tokens x top-%d)",
			len(in.TopK), want, s.Ranks, s.Tokens, s.TopK)
	}
	for i, e := range in.TopK {
		if e < -1 || e >= int64(s.Experts) {
			k := i % s.TopK
			t := i / s.TopK % s.Tokens
			return fmt.Errorf("topk_idx of rank %d, token %d, slot %d is %d, outside [-1, %d)",
				i/(s.TopK*s.Tokens), t, k, e, s.Experts)
		}
	}
	if in.Active != nil && len(in.Active) != s.Ranks {
		return fmt.Errorf("a mask of %d ranks in a job of %d", len(in.Active), s.Ranks)
	}
	if in.Active != nil && !in.Active[s.Rank] {
		return fmt.Errorf("rank %d is masked in the mask it is checked with", s.Rank)
	}
	if in.Weights != nil && len(in.Weights) != s.Tokens*s.TopK {
		return fmt.Errorf("weights have %d entries, want %d", len(in.Weights), s.Tokens*s.TopK)
	}
	return nil
}

// active reports whether rank q's terms count (Active).
func (in *Input) active(q int) bool { return in.Active == nil || in.Active[q] }

// topk returns the top-k slots of token t of rank s.
func (in *Input) topk(s, t int) []int64 {
	k := in.Shape.TopK
	i := (s*in.Shape.Tokens + t) * k
	return in.TopK[i : i+k]
}
