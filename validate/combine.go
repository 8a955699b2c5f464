package validate

import (
	"fmt"
	"math"

	"github.com/epbench/epbench/bf16"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
)

// checkCombine compares the combine output with ExpectedOut bit for bit and
// computes calc_diff.
func checkCombine(in *Input, out *ll.Outputs) (string, float64) {
	s := in.Shape
	if len(out.Out) != s.Own()*s.Hidden {
		return fmt.Sprintf("rank %d: combine output has %d elements, want %d", s.Rank, len(out.Out), s.Own()*s.Hidden), math.NaN()
	}
	want, ref := expected(in)
	diff := CalcDiff(out.Out, ref)
	for i, v := range out.Out {
		if v != want[i] {
			t, c := i/s.Hidden, i%s.Hidden
			return fmt.Sprintf("rank %d, token %d, column %d: got %#04x (%v) want %#04x (%v)",
				s.Rank, t, c, v, bf16.ToFloat32(v), want[i], bf16.ToFloat32(want[i])), diff
		}
	}
	return "", diff
}

// ExpectedOut returns the combine output docs/DESIGN.md prescribes for this
// rank, [Tokens, Hidden] bf16 bits (see the package documentation for the
// arithmetic). Weights nil means routing.Weights.
func ExpectedOut(in Input) ([]uint16, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	if in.Weights == nil {
		w, err := routing.Weights(in.Shape.Rank, in.Shape.Tokens, in.Shape.TopK)
		if err != nil {
			return nil, err
		}
		in.Weights = w
	}
	out, _ := expected(&in)
	return out, nil
}

// expected computes the exact expected output and ep_bench's float64
// reference (token row times the sum of the valid weights).
func expected(in *Input) ([]uint16, []float64) {
	s := in.Shape
	H, K, L := s.Hidden, s.TopK, s.LocalExperts()
	out := make([]uint16, s.Own()*H)
	ref := make([]float64, s.Own()*H)
	x := make([]uint16, H)
	y := make([]float32, H) // the identity expert's output, as fp32
	acc := make([]float32, H)
	part := make([]float32, H)
	live := make([]int64, K) // the token's selections, a masked rank's as -1 (none)
	var q []uint8
	var scales []float32
	var deq []uint16
	if in.Dtype == config.DtypeFP8E4M3 {
		q, scales, deq = make([]uint8, H), make([]float32, H/channelsPerScale), make([]uint16, H)
	}
	for t := 0; t < s.Own(); t++ {
		_ = routing.FillRow(x, s.Rank, t, in.Generation) // the shape was checked
		yBits := x
		if in.Dtype == config.DtypeFP8E4M3 {
			quantizeRow(x, q, scales)
			dequantizeRow(q, scales, deq)
			yBits = deq
		}
		for c, h := range yBits {
			y[c] = bf16.ToFloat32(h)
		}
		// -T: every term a masked rank would have sent is left out, as if
		// the token had not selected its experts.
		idx := in.topk(s.Rank, t)
		if in.Active != nil {
			for k, e := range idx {
				live[k] = e
				if e >= 0 && !in.active(int(e)/L) {
					live[k] = -1
				}
			}
			idx = live
		}
		w := in.Weights[t*K : (t+1)*K]
		clear(acc)
		switch {
		case s.RankMajor:
			// One slot per rank the token routes to, scaled by that rank's
			// weight sum (the validated pair's pre-scaling), the scaled bf16
			// rows added in rank order.
			for q := 0; q < s.Ranks; q++ {
				if !routesHere(idx, q, L) {
					continue
				}
				ws := rankSum(idx, w, q, L)
				for c := range acc {
					acc[c] = acc[c] + bf16.ToFloat32(bf16.FromFloat32(float32(y[c]*ws)))
				}
			}
		case in.Mode == config.DirectSend:
			for k, e := range idx {
				if e >= 0 {
					weightedAdd(acc, w[k], y)
				}
			}
		case in.Mode == config.RankLocalReduce:
			for owner := 0; owner < s.Ranks; owner++ {
				clear(part)
				hit := false
				for k, e := range idx {
					if e >= 0 && int(e)/L == owner {
						weightedAdd(part, w[k], y)
						hit = true
					}
				}
				if hit {
					for c := range acc {
						acc[c] = acc[c] + bf16.ToFloat32(bf16.FromFloat32(part[c]))
					}
				}
			}
		}
		var wsum float64
		for k, e := range idx {
			if e >= 0 {
				wsum += float64(w[k])
			}
		}
		row := out[t*H : (t+1)*H]
		for c := range row {
			row[c] = bf16.FromFloat32(acc[c])
			ref[t*H+c] = float64(bf16.ToFloat32(x[c])) * wsum
		}
	}
	return out, ref
}

// weightedAdd is acc[c] = acc[c] + w*y[c] with the product rounded to fp32
// before the add: the explicit conversion forbids a fused multiply-add.
func weightedAdd(acc []float32, w float32, y []float32) {
	for c, v := range y {
		acc[c] = acc[c] + float32(w*v)
	}
}

// CalcDiff is ep_bench's combine metric over out (bf16 bits) and ref:
// 1 − 2Σ(x+1)(y+1)/Σ[(x+1)²+(y+1)²] in float64. It is NaN when out holds a
// NaN or the lengths differ, and 0 for empty inputs.
func CalcDiff(out []uint16, ref []float64) float64 {
	if len(out) != len(ref) {
		return math.NaN()
	}
	var num, den float64
	for i, h := range out {
		x := float64(bf16.ToFloat32(h)) + 1
		y := ref[i] + 1
		num += x * y
		den += x*x + y*y
	}
	if den == 0 {
		return 0
	}
	return 1 - 2*num/den
}
