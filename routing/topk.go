package routing

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
)

const (
	// DefaultSeed is ep_bench's routing seed; rank r draws from seed + r.
	DefaultSeed = 1
	// MaskDraws is how many (token, slot) pairs ep_bench sets to -1 to mimic
	// dropped tokens. Repeated pairs are possible, so up to this many slots
	// end up masked.
	MaskDraws = 10
	// MaxSelections bounds tokens*topk: ep_bench indexes topk_idx with
	// 32-bit unsigned arithmetic, and larger tables are not a benchmark input.
	MaxSelections = math.MaxInt32
)

// GenSeed is the generator seed for rank's j-th routing table among ranks:
// seed + rank + j*ranks, modulo 2^32. j = 0 gives ep_bench's seed + rank;
// j > 0 gives fresh tables for re-routing without colliding with another
// rank's j = 0 table.
func GenSeed(seed uint32, rank, ranks, j int) uint32 {
	return seed + uint32(rank) + uint32(j)*uint32(ranks)
}

// TopK reproduces ep_bench's LL routing (generateRandomTopkIndicesLL) for one
// rank and returns topk_idx, tokens*topk expert ids row-major by token.
//
// The generator is std::mt19937(genSeed). For each token it draws one
// normal_distribution<float> value per expert, scores expert e with
// |draw|+1 and keeps the topk best in partial_sort order (descending score).
// Then, from the same generator, MaskDraws times a token uniform in
// [0, tokens-1] and a slot uniform in [0, topk-1] are drawn and that entry
// is set to -1.
//
// A rank that dispatches no tokens (ep_bench's --non-uniform-tokens) has an
// empty table.
func TopK(tokens, experts, topk int, genSeed uint32) ([]int64, error) {
	if tokens == 0 {
		if err := checkRouting(1, experts, topk); err != nil {
			return nil, err
		}
		return []int64{}, nil
	}
	if err := checkRouting(tokens, experts, topk); err != nil {
		return nil, err
	}
	g := NewMT19937(genSeed)
	var normal NormalFloat32
	scores := make([]scoredExpert, experts)
	idx := make([]int64, tokens*topk)
	for t := 0; t < tokens; t++ {
		for e := range scores {
			v := normal.Next(g)
			scores[e] = scoredExpert{score: float32(math.Abs(float64(v))) + 1, expert: int32(e)}
		}
		partialSortDesc(scores, topk)
		row := idx[t*topk : (t+1)*topk]
		for j := range row {
			row[j] = int64(scores[j].expert)
		}
	}
	// The bounds were checked above, so these cannot fail.
	tokenDist, _ := NewUniformUint32(0, uint32(tokens-1))
	slotDist, _ := NewUniformUint32(0, uint32(topk-1))
	for range MaskDraws {
		t := tokenDist.Next(g)
		k := slotDist.Next(g)
		idx[int(t)*topk+int(k)] = -1
	}
	return idx, nil
}

// NonUniformSeed seeds the per-rank token counts of ep_bench's
// --non-uniform-tokens.
const NonUniformSeed = 0xEB12345

// RankTokens are the tokens each of ranks dispatches with ep_bench's
// --non-uniform-tokens and at most tokens per rank: std::mt19937(0xEB12345),
// uniform_int_distribution<unsigned>(0, tokens) drawn once per rank in rank
// order, then rank 0 set to tokens and the last rank to 0.
func RankTokens(tokens, ranks int) []int {
	g := NewMT19937(NonUniformSeed)
	d, _ := NewUniformUint32(0, uint32(max(tokens, 0)))
	out := make([]int, ranks)
	for r := range out {
		out[r] = int(d.Next(g))
	}
	if ranks > 0 {
		out[0] = tokens
	}
	if ranks > 1 {
		out[ranks-1] = 0
	}
	return out
}

// TopKInt32 is TopK narrowed to int32 (ep_bench's --topk-idx-int32 layout).
func TopKInt32(tokens, experts, topk int, genSeed uint32) ([]int32, error) {
	idx, err := TopK(tokens, experts, topk, genSeed)
	if err != nil {
		return nil, err
	}
	out := make([]int32, len(idx))
	for i, v := range idx {
		out[i] = int32(v)
	}
	return out, nil
}

// Selections counts the valid (token, expert) pairs of a topk_idx table,
// the entries >= 0; ep_bench prints this as selections=.
func Selections[T int32 | int64](idx []T) int {
	n := 0
	for _, v := range idx {
		if v >= 0 {
			n++
		}
	}
	return n
}

func checkRouting(tokens, experts, topk int) error {
	switch {
	case tokens < 1:
		return fmt.Errorf("routing: tokens must be positive, got %d", tokens)
	case experts < 1:
		return fmt.Errorf("routing: experts must be positive, got %d", experts)
	case topk < 1:
		return fmt.Errorf("routing: top-k must be positive, got %d", topk)
	case topk > experts:
		return fmt.Errorf("routing: top-k (%d) exceeds the number of experts (%d)", topk, experts)
	case experts > math.MaxInt32:
		return fmt.Errorf("routing: experts (%d) exceeds %d", experts, math.MaxInt32)
	case tokens > MaxSelections/topk:
		return fmt.Errorf("routing: tokens*top-k (%d*%d) exceeds %d", tokens, topk, MaxSelections)
	}
	return nil
}

// WriteTopK writes a [tokens, topk] topk_idx as ep_bench's tools read it:
// one token per line, values separated by single spaces, -1 for masked.
func WriteTopK(out io.Writer, idx []int64, topk int) error {
	w := bufio.NewWriter(out)
	buf := make([]byte, 0, 16)
	for i, v := range idx {
		if i%topk > 0 {
			w.WriteByte(' ')
		}
		buf = strconv.AppendInt(buf[:0], v, 10)
		w.Write(buf)
		if i%topk == topk-1 {
			w.WriteByte('\n')
		}
	}
	return w.Flush()
}
