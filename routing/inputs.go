package routing

import (
	"fmt"
	"math"

	"github.com/epbench/epbench/bf16"
)

// Layout of ep_bench's --validate token rows (initializeValidationData).
const (
	// RankOffset is subtracted from the source rank so that the stored value
	// stays a small integer, which bfloat16 holds exactly.
	RankOffset = 128
	// TokenIDCols is how many trailing columns carry the token index: the
	// first of them holds t/256, the others t%256.
	TokenIDCols = 128
	// MinValidationHidden is the narrowest row with at least one rank column.
	MinValidationHidden = TokenIDCols + 1
	// MaxValidationRanks bounds the rank: rank-128 must be an integer that
	// bfloat16 represents exactly (|v| <= 256).
	MaxValidationRanks = 256 + RankOffset + 1
	// MaxValidationTokens bounds the token index so that t/256 stays below
	// 256, a byte like t%256.
	MaxValidationTokens = 256 * 256
	// WeightSeedBase is added to the rank to seed the weight generator.
	WeightSeedBase = 42
	// MinWeight is the floor ep_bench applies to |N(0,1)| weights.
	MinWeight float32 = 1e-6
)

// FillTokenRow writes the validation row of token t of rank into row, whose
// length is the hidden size: bf16(rank-128) in columns 0..H-129, bf16(t/256)
// in column H-128 and bf16(t%256) in columns H-127..H-1. All of these are
// small integers, exact in bfloat16, so rounding mode does not matter.
func FillTokenRow(row []uint16, rank, t int) error {
	if err := checkTokenRow(rank, t, len(row)); err != nil {
		return err
	}
	h := len(row)
	rankBits := bf16.FromFloat32(float32(rank - RankOffset))
	hi := bf16.FromFloat32(float32(t / 256))
	lo := bf16.FromFloat32(float32(t % 256))
	for c := 0; c < h-TokenIDCols; c++ {
		row[c] = rankBits
	}
	row[h-TokenIDCols] = hi
	for c := h - TokenIDCols + 1; c < h; c++ {
		row[c] = lo
	}
	return nil
}

// TokenRow returns the validation row of token t of rank for hidden size
// hidden.
func TokenRow(rank, t, hidden int) ([]uint16, error) {
	if hidden < MinValidationHidden {
		return nil, fmt.Errorf("routing: hidden %d is below %d, too narrow for the token id columns", hidden, MinValidationHidden)
	}
	row := make([]uint16, hidden)
	if err := FillTokenRow(row, rank, t); err != nil {
		return nil, err
	}
	return row, nil
}

// TokenRows returns rank's validation tokens, [tokens, hidden] row-major
// (generation 0; FillRows writes another generation's into a buffer).
func TokenRows(rank, tokens, hidden int) ([]uint16, error) {
	if tokens < 1 {
		return nil, fmt.Errorf("routing: tokens must be positive, got %d", tokens)
	}
	if tokens > MaxValidationTokens {
		return nil, fmt.Errorf("routing: %d tokens exceed %d, the most the token id columns can encode", tokens, MaxValidationTokens)
	}
	if hidden < MinValidationHidden {
		return nil, fmt.Errorf("routing: hidden %d is below %d, too narrow for the token id columns", hidden, MinValidationHidden)
	}
	if tokens > math.MaxInt/hidden {
		return nil, fmt.Errorf("routing: %d tokens of hidden %d overflow", tokens, hidden)
	}
	rows := make([]uint16, tokens*hidden)
	if err := FillRows(rows, rank, hidden, 0); err != nil {
		return nil, err
	}
	return rows, nil
}

func checkTokenRow(rank, t, hidden int) error {
	switch {
	case hidden < MinValidationHidden:
		return fmt.Errorf("routing: hidden %d is below %d, too narrow for the token id columns", hidden, MinValidationHidden)
	case rank < 0 || rank >= MaxValidationRanks:
		return fmt.Errorf("routing: rank %d outside [0, %d), not encodable exactly in bf16", rank, MaxValidationRanks)
	case t < 0 || t >= MaxValidationTokens:
		return fmt.Errorf("routing: token %d outside [0, %d), not encodable in the token id columns", t, MaxValidationTokens)
	}
	return nil
}

// DecodeRow recovers (source rank, token) from a received validation row and
// reports whether the row is intact: wide enough, every rank column
// bit-identical, every low-byte column bit-identical, and each field an exact
// integer in range. Like ep_bench it reads the rank from column 0 and the
// token from columns H-128 and H-1; when those are not integers it returns
// -1 for the field. ok is false for any corrupted row, so rank and token are
// then only a hint for error messages.
func DecodeRow(row []uint16) (rank, token int, ok bool) {
	h := len(row)
	if h < MinValidationHidden {
		return -1, -1, false
	}
	rv, rankOK := exactInt(row[0])
	hi, hiOK := exactInt(row[h-TokenIDCols])
	lo, loOK := exactInt(row[h-1])
	rank, token = -1, -1
	if rankOK {
		rank = rv + RankOffset
	}
	if hiOK && loOK {
		token = hi*256 + lo
	}
	ok = rankOK && hiOK && loOK &&
		rank >= 0 && rank < MaxValidationRanks &&
		hi >= 0 && hi < 256 && lo >= 0 && lo < 256
	for c := 1; ok && c < h-TokenIDCols; c++ {
		ok = row[c] == row[0]
	}
	for c := h - TokenIDCols + 1; ok && c < h-1; c++ {
		ok = row[c] == row[h-1]
	}
	return rank, token, ok
}

// exactInt returns the bfloat16 value as an int if it is an integer of
// magnitude at most 2^16 (far beyond any encoded field).
func exactInt(h uint16) (int, bool) {
	f := float64(bf16.ToFloat32(h))
	if math.IsNaN(f) || math.Abs(f) > 1<<16 || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

// Weights returns rank's validation top-k weights, [tokens, topk] row-major:
// |N(0,1)| drawn with normal_distribution<float> from
// std::mt19937(42 + rank), one draw per slot in row-major order (masked
// slots draw too), each raised to at least 1e-6.
func Weights(rank, tokens, topk int) ([]float32, error) {
	switch {
	case tokens < 1:
		return nil, fmt.Errorf("routing: tokens must be positive, got %d", tokens)
	case topk < 1:
		return nil, fmt.Errorf("routing: top-k must be positive, got %d", topk)
	case tokens > MaxSelections/topk:
		return nil, fmt.Errorf("routing: tokens*top-k (%d*%d) exceeds %d", tokens, topk, MaxSelections)
	}
	g := NewMT19937(uint32(WeightSeedBase + rank))
	var normal NormalFloat32
	w := make([]float32, tokens*topk)
	for i := range w {
		v := float32(math.Abs(float64(normal.Next(g))))
		w[i] = max(v, MinWeight)
	}
	return w, nil
}
