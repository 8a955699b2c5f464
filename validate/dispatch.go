package validate

import (
	"fmt"
	"math"

	"github.com/epbench/epbench/bf16"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
)

// dispatchChecker holds the expected selections of this rank's experts and
// scratch rows.
type dispatchChecker struct {
	in   *Input
	out  *ll.Outputs
	rank int
	L    int
	RT   int
	H    int
	// selected[l][s*T+t] says whether token t of rank s selected local
	// expert l; count[l*R+s] is how many tokens of s did.
	selected [][]bool
	count    []int
	want     []uint16 // expected BF16 row
	wantQ    []uint8  // expected FP8 row
	wantS    []float32
}

// checkDispatch returns the first dispatch failure, or "".
func checkDispatch(in *Input, out *ll.Outputs) string {
	s := in.Shape
	if s.RankMajor {
		return checkDispatchRM(in, out)
	}
	d := &dispatchChecker{in: in, out: out, rank: s.Rank, L: s.LocalExperts(), RT: s.Ranks * s.Tokens, H: s.Hidden}
	if msg := d.checkSizes(); msg != "" {
		return fmt.Sprintf("rank %d: %s", d.rank, msg)
	}
	d.expect()
	d.want = make([]uint16, d.H)
	if in.Dtype == config.DtypeFP8E4M3 {
		d.wantQ = make([]uint8, d.H)
		d.wantS = make([]float32, d.H/channelsPerScale)
	}
	for l := 0; l < d.L; l++ {
		if msg := d.checkExpert(l); msg != "" {
			return msg
		}
	}
	return ""
}

func (d *dispatchChecker) checkSizes() string {
	n := d.L * d.RT
	if len(d.out.RecvCount) != d.L {
		return fmt.Sprintf("recv_count has %d entries, want %d", len(d.out.RecvCount), d.L)
	}
	if len(d.out.SrcInfo) != n {
		return fmt.Sprintf("src_info has %d entries, want %d", len(d.out.SrcInfo), n)
	}
	if len(d.out.LayoutRange) != d.L*d.in.Shape.Ranks {
		return fmt.Sprintf("layout_range has %d entries, want %d", len(d.out.LayoutRange), d.L*d.in.Shape.Ranks)
	}
	if n > math.MaxInt/d.H {
		return "receive buffers overflow"
	}
	if d.in.Dtype == config.DtypeFP8E4M3 {
		if len(d.out.RecvFP8) != n*d.H {
			return fmt.Sprintf("FP8 recv_x has %d bytes, want %d", len(d.out.RecvFP8), n*d.H)
		}
		if len(d.out.RecvScales) != n*d.H/channelsPerScale {
			return fmt.Sprintf("recv_scales has %d entries, want %d", len(d.out.RecvScales), n*d.H/channelsPerScale)
		}
		return ""
	}
	if len(d.out.RecvX) != n*d.H {
		return fmt.Sprintf("recv_x has %d elements, want %d", len(d.out.RecvX), n*d.H)
	}
	return ""
}

// expect derives, from every rank's topk_idx, which (source, token) pairs
// each local expert must receive.
func (d *dispatchChecker) expect() {
	s := d.in.Shape
	d.selected = make([][]bool, d.L)
	for l := range d.selected {
		d.selected[l] = make([]bool, d.RT)
	}
	d.count = make([]int, d.L*s.Ranks)
	first := int64(d.rank * d.L)
	for src := 0; src < s.Ranks; src++ {
		for t := 0; t < s.Tokens; t++ {
			for _, e := range d.in.topk(src, t) {
				if e < first || e >= first+int64(d.L) {
					continue
				}
				l := int(e - first)
				if !d.selected[l][src*s.Tokens+t] {
					d.selected[l][src*s.Tokens+t] = true
					d.count[l*s.Ranks+src]++
				}
			}
		}
	}
}

// checkExpert checks recv_count, layout_range and every valid row of local
// expert l.
func (d *dispatchChecker) checkExpert(l int) string {
	R, T := d.in.Shape.Ranks, d.in.Shape.Tokens
	e := d.rank*d.L + l
	where := fmt.Sprintf("rank %d, expert %d (local %d)", d.rank, e, l)
	want := 0
	for src := 0; src < R; src++ {
		want += d.count[l*R+src]
	}
	n := int(d.out.RecvCount[l])
	if n != want {
		return fmt.Sprintf("%s: recv_count is %d, want %d", where, n, want)
	}

	// The source ranges must tile [0, n) exactly.
	owner := make([]int, n)
	for i := range owner {
		owner[i] = -1
	}
	for src := 0; src < R; src++ {
		v := d.out.LayoutRange[l*R+src]
		begin, cnt := v>>32, v&0xffffffff
		if cnt != int64(d.count[l*R+src]) {
			return fmt.Sprintf("%s: layout_range of source rank %d has count %d, want %d (entry %#x)",
				where, src, cnt, d.count[l*R+src], uint64(v))
		}
		if cnt == 0 {
			continue
		}
		if begin < 0 || begin+cnt > int64(n) {
			return fmt.Sprintf("%s: layout_range of source rank %d is rows [%d, %d), outside [0, %d)",
				where, src, begin, begin+cnt, n)
		}
		for i := begin; i < begin+cnt; i++ {
			if owner[i] >= 0 {
				return fmt.Sprintf("%s, row %d: claimed by the layout_range of source ranks %d and %d",
					where, i, owner[i], src)
			}
			owner[i] = src
		}
	}
	for i, src := range owner {
		if src < 0 {
			return fmt.Sprintf("%s, row %d: in no source rank's layout_range", where, i)
		}
	}

	seen := make([]bool, d.RT)
	for i := 0; i < n; i++ {
		if msg := d.checkRow(l, i, owner[i], seen); msg != "" {
			return fmt.Sprintf("%s, row %d: %s", where, i, msg)
		}
	}
	for src := 0; src < R; src++ {
		for t := 0; t < T; t++ {
			if d.selected[l][src*T+t] && !seen[src*T+t] {
				return fmt.Sprintf("%s: token %d of source rank %d is missing", where, t, src)
			}
		}
	}
	return ""
}

// checkRow checks row i of local expert l, which layout_range gives to
// source rank src.
func (d *dispatchChecker) checkRow(l, i, src int, seen []bool) string {
	T := d.in.Shape.Tokens
	slot := l*d.RT + i
	t := int(d.out.SrcInfo[slot])
	if t < 0 || t >= T {
		return fmt.Sprintf("src_info is token %d, outside [0, %d) (source rank %d)", t, T, src)
	}
	if !d.selected[l][src*T+t] {
		return fmt.Sprintf("token %d of source rank %d (src_info, layout_range) did not select this expert", t, src)
	}
	if seen[src*T+t] {
		return fmt.Sprintf("token %d of source rank %d received twice", t, src)
	}
	seen[src*T+t] = true
	// The shape was checked, so the row can be built.
	_ = routing.FillRow(d.want, src, t, d.in.Generation)
	if d.in.Dtype == config.DtypeFP8E4M3 {
		return d.checkFP8Row(slot, src, t)
	}
	row := d.out.RecvX[slot*d.H : (slot+1)*d.H]
	gr, gt, ok := routing.DecodeRow(row)
	if ok && d.in.Generation == 0 && (gr != src || gt != t) {
		return fmt.Sprintf("row holds token %d of source rank %d, but src_info and layout_range say token %d of source rank %d",
			gt, gr, t, src)
	}
	for c := range row {
		if row[c] != d.want[c] {
			return fmt.Sprintf("column %d is %#04x (%v), want %#04x (%v) for token %d of source rank %d",
				c, row[c], bf16.ToFloat32(row[c]), d.want[c], bf16.ToFloat32(d.want[c]), t, src)
		}
	}
	return ""
}

func (d *dispatchChecker) checkFP8Row(slot, src, t int) string {
	quantizeRow(d.want, d.wantQ, d.wantS)
	nb := d.H / channelsPerScale
	q := d.out.RecvFP8[slot*d.H : (slot+1)*d.H]
	scales := d.out.RecvScales[slot*nb : (slot+1)*nb]
	for b, v := range scales {
		if math.Float32bits(v) != math.Float32bits(d.wantS[b]) {
			return fmt.Sprintf("scale of columns [%d, %d) is %v, want %v for token %d of source rank %d",
				b*channelsPerScale, (b+1)*channelsPerScale, v, d.wantS[b], t, src)
		}
	}
	for c := range q {
		if q[c] != d.wantQ[c] {
			return fmt.Sprintf("column %d is E4M3 %#02x (%v), want %#02x (%v) for token %d of source rank %d",
				c, q[c], fromE4M3(q[c]), d.wantQ[c], fromE4M3(d.wantQ[c]), t, src)
		}
	}
	return ""
}
