package validate

import (
	"fmt"
	"math"

	"github.com/epbench/epbench/bf16"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
)

// The rank-major layout (docs/DESIGN.md): slot (s, m) of every [R, T]
// output holds the m-th token (ascending) of source rank s that selects at
// least one of this rank's experts: its row, its token index (SrcInfo), its
// top-k experts as this rank's local ones (-1 elsewhere) and its top-k
// weights. RecvCount[s] is the tokens of s received; the slots past it are
// not looked at.

// routesHere reports whether a token's top-k selects an expert of rank q.
func routesHere(idx []int64, q, localExperts int) bool {
	for _, e := range idx {
		if e >= 0 && int(e)/localExperts == q {
			return true
		}
	}
	return false
}

// checkDispatchRM returns the first rank-major dispatch failure, or "".
func checkDispatchRM(in *Input, out *ll.Outputs) string {
	s := in.Shape
	R, T, H, K, L := s.Ranks, s.Tokens, s.Hidden, s.TopK, s.LocalExperts()
	fp8 := in.Dtype == config.DtypeFP8E4M3
	where := fmt.Sprintf("rank %d", s.Rank)
	switch {
	case len(out.RecvCount) != R:
		return fmt.Sprintf("%s: rank-major recv_count has %d entries, want one per source rank (%d)", where, len(out.RecvCount), R)
	case len(out.SrcInfo) != R*T:
		return fmt.Sprintf("%s: rank-major src_info has %d entries, want %d", where, len(out.SrcInfo), R*T)
	case len(out.RecvTopkIdx) != R*T*K || len(out.RecvTopkWeights) != R*T*K:
		return fmt.Sprintf("%s: rank-major top-k outputs have %d and %d entries, want %d", where, len(out.RecvTopkIdx), len(out.RecvTopkWeights), R*T*K)
	case !fp8 && len(out.RecvX) != R*T*H:
		return fmt.Sprintf("%s: rank-major recv_x has %d elements, want %d", where, len(out.RecvX), R*T*H)
	case fp8 && (len(out.RecvFP8) != R*T*H || len(out.RecvScales) != R*T*H/channelsPerScale):
		return fmt.Sprintf("%s: rank-major FP8 recv_x has %d bytes and %d scales, want %d and %d", where, len(out.RecvFP8), len(out.RecvScales), R*T*H, R*T*H/channelsPerScale)
	}
	wantRow := make([]uint16, H)
	wantQ, wantS := make([]uint8, H), make([]float32, H/channelsPerScale)
	for src := 0; src < R; src++ {
		weights, err := routing.Weights(src, T, K)
		if err != nil {
			return fmt.Sprintf("%s: weights of rank %d: %v", where, src, err)
		}
		want := 0
		for t := 0; t < T; t++ {
			if routesHere(in.topk(src, t), s.Rank, L) {
				want++
			}
		}
		if int(out.RecvCount[src]) != want {
			return fmt.Sprintf("%s: recv_count of source rank %d is %d, want %d", where, src, out.RecvCount[src], want)
		}
		m := 0
		for t := 0; t < T; t++ {
			idx := in.topk(src, t)
			if !routesHere(idx, s.Rank, L) {
				continue
			}
			slot := src*T + m
			m++
			at := fmt.Sprintf("%s, slot %d of source rank %d (its token %d)", where, m-1, src, t)
			if got := out.SrcInfo[slot]; got != int32(t) {
				return fmt.Sprintf("%s: src_info is %d, want %d", at, got, t)
			}
			gotIdx := out.RecvTopkIdx[slot*K : (slot+1)*K]
			for k, e := range idx {
				local := int32(-1)
				if e >= 0 && int(e)/L == s.Rank {
					local = int32(int(e) % L)
				}
				if gotIdx[k] != local {
					return fmt.Sprintf("%s: top-k %d is %d, want %d (expert %d)", at, k, gotIdx[k], local, e)
				}
				if got, w := out.RecvTopkWeights[slot*K+k], weights[t*K+k]; math.Float32bits(got) != math.Float32bits(w) {
					return fmt.Sprintf("%s: weight %d is %v, want %v", at, k, got, w)
				}
			}
			_ = routing.FillRow(wantRow, src, t, in.Generation) // the shape was checked
			if fp8 {
				quantizeRow(wantRow, wantQ, wantS)
				q := out.RecvFP8[slot*H : (slot+1)*H]
				sc := out.RecvScales[slot*H/channelsPerScale : (slot+1)*H/channelsPerScale]
				for b := range sc {
					if math.Float32bits(sc[b]) != math.Float32bits(wantS[b]) {
						return fmt.Sprintf("%s: scale of columns [%d, %d) is %v, want %v", at, b*channelsPerScale, (b+1)*channelsPerScale, sc[b], wantS[b])
					}
				}
				for c := range q {
					if q[c] != wantQ[c] {
						return fmt.Sprintf("%s: column %d is E4M3 %#02x, want %#02x", at, c, q[c], wantQ[c])
					}
				}
				continue
			}
			row := out.RecvX[slot*H : (slot+1)*H]
			for c := range row {
				if row[c] != wantRow[c] {
					return fmt.Sprintf("%s: column %d is %#04x (%v), want %#04x (%v)", at, c, row[c], bf16.ToFloat32(row[c]), wantRow[c], bf16.ToFloat32(wantRow[c]))
				}
			}
		}
	}
	return ""
}

// rankSum is the weight rank q's slot of a token is scaled by before the
// rank-major combine of a validated pair: the fp32 sum, in top-k order, of
// the weights of the token's selections on q (docs/DESIGN.md).
func rankSum(idx []int64, w []float32, q, localExperts int) float32 {
	var sum float32
	for k, e := range idx {
		if e >= 0 && int(e)/localExperts == q {
			sum = sum + w[k]
		}
	}
	return sum
}
