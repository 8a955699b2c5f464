package validate

import (
	"math"
	"strings"
	"testing"

	"github.com/epbench/epbench/bf16"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
)

// orderInput is a two-rank job whose token 0 of rank 0 selects experts
// 0 (rank 0), 2 (rank 1) and 1 (rank 0), with weights 1, 2^-10 and 2^-8.
// Its rows hold -128 (rank 0 - 128) in the first H-128 columns, so the
// products are exact and only the order of the additions matters:
//
//	direct_send:       bf16((-128 + -0.125) + -0.5) = bf16(-128.625) = -129
//	rank_local_reduce: bf16(-128 + -0.5) = -128 (tie to even); + bf16(-0.125)
//	                   = bf16(-128.125) = -128
func orderInput(mode config.CombineMode) Input {
	return Input{
		Shape: ll.Shape{Ranks: 2, Rank: 0, Tokens: 1, Hidden: 256, TopK: 3, Experts: 4},
		Mode:  mode,
		// rank 0's token, then rank 1's token (experts 3, 1, -1).
		TopK:    []int64{0, 2, 1, 3, 1, -1},
		Weights: []float32{1, 0x1p-10, 0x1p-8},
	}
}

func TestCombineOrderMatters(t *testing.T) {
	ds, err := ExpectedOut(orderInput(config.DirectSend))
	if err != nil {
		t.Fatal(err)
	}
	rlr, err := ExpectedOut(orderInput(config.RankLocalReduce))
	if err != nil {
		t.Fatal(err)
	}
	if got := bf16.ToFloat32(ds[0]); got != -129 {
		t.Errorf("direct_send column 0 = %v, want -129", got)
	}
	if got := bf16.ToFloat32(rlr[0]); got != -128 {
		t.Errorf("rank_local_reduce column 0 = %v, want -128", got)
	}
	// The token id columns hold zeros: the output is zero there.
	if ds[255] != 0 || rlr[255] != 0 {
		t.Errorf("token id columns: %#04x and %#04x, want 0", ds[255], rlr[255])
	}
}

// TestRankOrderOfPartials: partials -1, -2^-8, -2^-24, -2^-24 on ranks 0..3
// give -1 when summed in rank order (the reverse order would give
// -1-2^-7).
func TestRankOrderOfPartials(t *testing.T) {
	in := Input{
		Shape:   ll.Shape{Ranks: 4, Rank: 0, Tokens: 1, Hidden: 256, TopK: 4, Experts: 4},
		Mode:    config.RankLocalReduce,
		TopK:    []int64{0, 1, 2, 3, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1, -1, -1},
		Weights: []float32{0x1p-7, 0x1p-15, 0x1p-31, 0x1p-31},
	}
	out, err := ExpectedOut(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := bf16.ToFloat32(out[0]); got != -1 {
		t.Errorf("got %v, want -1", got)
	}
}

// TestWeightedAddRoundsTwice: acc + w*y with the product rounded first
// (see the same case in package cpuref); a fused multiply-add would keep
// the product's low bits.
func TestWeightedAddRoundsTwice(t *testing.T) {
	const yv, wv = 1 + 0x1p-7, 1 + 0x1p-17 + 0x1p-23
	acc := []float32{-yv}
	weightedAdd(acc, wv, []float32{yv})
	if want := float32(0x1p-17 + 0x1p-22); acc[0] != want {
		t.Errorf("got %v, want %v", acc[0], want)
	}
}

// buildOutputs is a from-scratch model of a correct dispatch on rank
// in.Shape.Rank (canonical order) plus the expected combine output.
func buildOutputs(t *testing.T, in Input) *ll.Outputs {
	t.Helper()
	s := in.Shape
	L, RT, H := s.LocalExperts(), s.Ranks*s.Tokens, s.Hidden
	o := &ll.Outputs{
		RecvCount:   make([]int32, L),
		SrcInfo:     make([]int32, L*RT),
		LayoutRange: make([]int64, L*s.Ranks),
	}
	fp8 := in.Dtype == config.DtypeFP8E4M3
	if fp8 {
		o.RecvFP8, o.RecvScales = make([]uint8, L*RT*H), make([]float32, L*RT*H/128)
	} else {
		o.RecvX = make([]uint16, L*RT*H)
	}
	for l := 0; l < L; l++ {
		e := int64(s.Rank*L + l)
		n := 0
		for src := 0; src < s.Ranks; src++ {
			begin := n
			for tok := 0; tok < s.Tokens; tok++ {
				hit := false
				for k := 0; k < s.TopK; k++ {
					hit = hit || in.TopK[(src*s.Tokens+tok)*s.TopK+k] == e
				}
				if !hit {
					continue
				}
				row := make([]uint16, H)
				if err := routing.FillRow(row, src, tok, in.Generation); err != nil {
					t.Fatal(err)
				}
				slot := l*RT + n
				if fp8 {
					quantizeRow(row, o.RecvFP8[slot*H:(slot+1)*H], o.RecvScales[slot*H/128:(slot+1)*H/128])
				} else {
					copy(o.RecvX[slot*H:], row)
				}
				o.SrcInfo[slot] = int32(tok)
				n++
			}
			o.LayoutRange[l*s.Ranks+src] = int64(begin)<<32 | int64(n-begin)
		}
		o.RecvCount[l] = int32(n)
	}
	var err error
	if o.Out, err = ExpectedOut(in); err != nil {
		t.Fatal(err)
	}
	return o
}

func randomInput(t *testing.T, rank int, dtype config.DispatchDtype, mode config.CombineMode) Input {
	t.Helper()
	shape := ll.Shape{Ranks: 2, Rank: rank, Tokens: 8, Hidden: 256, TopK: 3, Experts: 4}
	all, err := RoutingTopK(shape, 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	return Input{Shape: shape, Dtype: dtype, Mode: mode, TopK: all}
}

func TestCheckAcceptsCorrectOutputs(t *testing.T) {
	for _, dtype := range []config.DispatchDtype{config.DtypeBF16, config.DtypeFP8E4M3} {
		for rank := 0; rank < 2; rank++ {
			in := randomInput(t, rank, dtype, config.RankLocalReduce)
			rep := Check(in, buildOutputs(t, in))
			if !rep.DispatchOK || !rep.CombineOK || rep.First != "" {
				t.Errorf("%v rank %d: %+v", dtype, rank, rep)
			}
			if math.IsNaN(rep.CalcDiff) || rep.CalcDiff < 0 || rep.CalcDiff > 1e-3 {
				t.Errorf("%v rank %d: calc_diff %v", dtype, rank, rep.CalcDiff)
			}
		}
	}
}

// TestCheckAcceptsAnySourceOrder: the GPU may place source blocks and rows
// in another order, as long as src_info and layout_range describe it.
func TestCheckAcceptsAnySourceOrder(t *testing.T) {
	in := randomInput(t, 1, config.DtypeBF16, config.DirectSend)
	o := buildOutputs(t, in)
	s := in.Shape
	H, RT := s.Hidden, s.Ranks*s.Tokens
	for l := 0; l < s.LocalExperts(); l++ {
		n := int(o.RecvCount[l])
		if n < 2 {
			continue
		}
		// Reverse the rows of this expert and mirror the ranges.
		for i := 0; i < n/2; i++ {
			a, b := l*RT+i, l*RT+n-1-i
			o.SrcInfo[a], o.SrcInfo[b] = o.SrcInfo[b], o.SrcInfo[a]
			for c := 0; c < H; c++ {
				o.RecvX[a*H+c], o.RecvX[b*H+c] = o.RecvX[b*H+c], o.RecvX[a*H+c]
			}
		}
		for src := 0; src < s.Ranks; src++ {
			v := o.LayoutRange[l*s.Ranks+src]
			begin, cnt := v>>32, v&0xffffffff
			o.LayoutRange[l*s.Ranks+src] = (int64(n)-begin-cnt)<<32 | cnt
		}
	}
	if rep := Check(in, o); !rep.DispatchOK {
		t.Fatalf("reordered layout rejected: %s", rep.First)
	}
}

func firstRowExpert(t *testing.T, o *ll.Outputs) int {
	t.Helper()
	for l, n := range o.RecvCount {
		if n > 0 {
			return l
		}
	}
	t.Fatal("no local expert received a row")
	return -1
}

func TestCheckNamesTheFailure(t *testing.T) {
	const rank = 1
	cases := []struct {
		name    string
		dtype   config.DispatchDtype
		corrupt func(o *ll.Outputs, l, RT, H int)
		want    []string
	}{
		{"row byte", config.DtypeBF16, func(o *ll.Outputs, l, RT, H int) { o.RecvX[(l*RT)*H+5] ^= 1 },
			[]string{"rank 1, expert", "row 0: column 5"}},
		{"row of another rank", config.DtypeBF16, func(o *ll.Outputs, l, RT, H int) {
			for c := 0; c < H-128; c++ {
				o.RecvX[l*RT*H+c] = bf16.FromFloat32(-100)
			}
		}, []string{"row 0: row holds token", "of source rank 28"}},
		{"recv_count", config.DtypeBF16, func(o *ll.Outputs, l, RT, H int) { o.RecvCount[l]++ },
			[]string{"rank 1, expert", "recv_count is"}},
		{"layout_range count", config.DtypeBF16, func(o *ll.Outputs, l, RT, H int) {
			for s := 0; s < 2; s++ {
				if o.LayoutRange[l*2+s]&0xffffffff > 0 {
					o.LayoutRange[l*2+s]--
					return
				}
			}
		}, []string{"rank 1, expert", "layout_range of source rank", "has count"}},
		{"layout_range begin", config.DtypeBF16, func(o *ll.Outputs, l, RT, H int) {
			for s := 0; s < 2; s++ {
				if o.LayoutRange[l*2+s]&0xffffffff > 0 {
					o.LayoutRange[l*2+s] += 1 << 32
					return
				}
			}
		}, []string{"rank 1, expert", "layout_range"}},
		{"src_info", config.DtypeBF16, func(o *ll.Outputs, l, RT, H int) { o.SrcInfo[l*RT] = 99 },
			[]string{"row 0: src_info is token 99"}},
		{"src_info other token", config.DtypeBF16, func(o *ll.Outputs, l, RT, H int) {
			o.SrcInfo[l*RT] = (o.SrcInfo[l*RT] + 1) % 8
		}, []string{"rank 1, expert", "row 0:"}},
		{"fp8 byte", config.DtypeFP8E4M3, func(o *ll.Outputs, l, RT, H int) { o.RecvFP8[l*RT*H+7] ^= 0x10 },
			[]string{"rank 1, expert", "row 0: column 7 is E4M3"}},
		{"fp8 scale", config.DtypeFP8E4M3, func(o *ll.Outputs, l, RT, H int) {
			o.RecvScales[l*RT*H/128+1] = math.Nextafter32(o.RecvScales[l*RT*H/128+1], 1)
		}, []string{"row 0: scale of columns [128, 256)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := randomInput(t, rank, c.dtype, config.RankLocalReduce)
			o := buildOutputs(t, in)
			l := firstRowExpert(t, o)
			c.corrupt(o, l, in.Shape.Ranks*in.Shape.Tokens, in.Shape.Hidden)
			rep := Check(in, o)
			if rep.DispatchOK {
				t.Fatal("corruption not detected")
			}
			if !rep.CombineOK {
				t.Errorf("combine failed too: %s", rep.CombineFailure)
			}
			for _, w := range c.want {
				if !strings.Contains(rep.First, w) {
					t.Errorf("failure %q does not contain %q", rep.First, w)
				}
			}
		})
	}
}

func TestCheckNamesCombineColumn(t *testing.T) {
	for _, mode := range []config.CombineMode{config.RankLocalReduce, config.DirectSend} {
		in := randomInput(t, 0, config.DtypeBF16, mode)
		o := buildOutputs(t, in)
		o.Out[3*256+17] ^= 1
		rep := Check(in, o)
		if !rep.DispatchOK || rep.CombineOK {
			t.Fatalf("%v: %+v", mode, rep)
		}
		if !strings.HasPrefix(rep.First, "rank 0, token 3, column 17: got ") {
			t.Errorf("%v: failure %q", mode, rep.First)
		}
		o.Out[0] = 0x7FC1
		if rep := Check(in, o); !math.IsNaN(rep.CalcDiff) {
			t.Errorf("%v: calc_diff %v with a NaN in the output", mode, rep.CalcDiff)
		}
	}
}

func TestCheckRejectsMalformedInput(t *testing.T) {
	good := randomInput(t, 0, config.DtypeBF16, config.DirectSend)
	cases := []struct {
		name string
		edit func(in *Input, o *ll.Outputs) *ll.Outputs
		want string
	}{
		{"short topk", func(in *Input, o *ll.Outputs) *ll.Outputs { in.TopK = in.TopK[1:]; return o }, "topk_idx of all ranks has 47 entries, want 48"},
		{"expert out of range", func(in *Input, o *ll.Outputs) *ll.Outputs {
			in.TopK = append([]int64{9}, in.TopK[1:]...)
			return o
		}, "topk_idx of rank 0, token 0, slot 0 is 9"},
		{"bad rank", func(in *Input, o *ll.Outputs) *ll.Outputs { in.Shape.Rank = 2; return o }, "rank 2 outside [0, 2)"},
		{"narrow hidden", func(in *Input, o *ll.Outputs) *ll.Outputs { in.Shape.Hidden = 128; return o }, "hidden 128"},
		{"experts", func(in *Input, o *ll.Outputs) *ll.Outputs { in.Shape.Experts = 3; return o }, "experts 3"},
		{"weights", func(in *Input, o *ll.Outputs) *ll.Outputs { in.Weights = []float32{1}; return o }, "weights have 1 entries, want 24"},
		{"nil outputs", func(in *Input, o *ll.Outputs) *ll.Outputs { return nil }, "rank 0: no outputs"},
		{"short recv_x", func(in *Input, o *ll.Outputs) *ll.Outputs { o.RecvX = o.RecvX[:10]; return o }, "recv_x has 10 elements"},
		{"short out", func(in *Input, o *ll.Outputs) *ll.Outputs { o.Out = nil; return o }, "combine output has 0 elements"},
		{"negative count", func(in *Input, o *ll.Outputs) *ll.Outputs { o.RecvCount[0] = -5; return o }, "recv_count is -5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := good
			in.TopK = append([]int64(nil), good.TopK...)
			o := c.edit(&in, buildOutputs(t, good))
			rep := Check(in, o)
			if rep.DispatchOK && rep.CombineOK {
				t.Fatal("accepted")
			}
			if !strings.Contains(rep.First, c.want) {
				t.Errorf("failure %q does not contain %q", rep.First, c.want)
			}
		})
	}
}

func TestSkipCombine(t *testing.T) {
	in := randomInput(t, 0, config.DtypeBF16, config.DirectSend)
	o := buildOutputs(t, in)
	o.Out = nil
	in.SkipCombine = true
	if rep := Check(in, o); !rep.DispatchOK || !rep.CombineOK || !math.IsNaN(rep.CalcDiff) {
		t.Errorf("%+v", rep)
	}
}

func TestCalcDiff(t *testing.T) {
	out := []uint16{bf16.FromFloat32(1), bf16.FromFloat32(2)}
	if d := CalcDiff(out, []float64{1, 2}); d != 0 {
		t.Errorf("identical: %v", d)
	}
	// x+1 = (2, 3), y+1 = (2, 4): 1 - 2*16/(13+20) = 1/33.
	if d := CalcDiff(out, []float64{1, 3}); math.Abs(d-1.0/33) > 1e-15 {
		t.Errorf("got %v, want 1/33", d)
	}
	if d := CalcDiff(out, []float64{1}); !math.IsNaN(d) {
		t.Errorf("length mismatch: %v", d)
	}
}

func TestRoutingTopKMatchesRouting(t *testing.T) {
	shape := ll.Shape{Ranks: 3, Tokens: 5, TopK: 2, Experts: 6}
	all, err := RoutingTopK(shape, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	for s := 0; s < 3; s++ {
		want, err := routing.TopK(5, 6, 2, routing.GenSeed(1, s, 3, 2))
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range want {
			if all[s*10+i] != v {
				t.Fatalf("rank %d entry %d = %d, want %d", s, i, all[s*10+i], v)
			}
		}
	}
}

func TestValidatorMatchesCheck(t *testing.T) {
	in := randomInput(t, 1, config.DtypeFP8E4M3, config.DirectSend)
	cfg := &config.Config{Seed: 7, DispatchDtype: in.Dtype, CombineMode: in.Mode}
	v := Validator(in.Shape, cfg)
	o := buildOutputs(t, in)
	c, err := v(o, 0, 0, nil)
	if err != nil || !c.DispatchOK || !c.CombineOK || c.First != "" {
		t.Fatalf("routing 0: %+v, %v", c, err)
	}
	// Routing 1 is another table: the same outputs no longer match.
	if c, err := v(o, 1, 0, nil); err != nil || c.DispatchOK || !strings.HasPrefix(c.First, "rank 1, expert") {
		t.Errorf("routing 1: %+v, %v", c, err)
	}
	o.Out[5] ^= 1
	if c, _ := v(o, 0, 0, nil); c.CombineOK || !strings.HasPrefix(c.First, "rank 1, token 0, column 5: ") {
		t.Errorf("corrupted output: %+v", c)
	}
}

// A pair checked against another generation than the one it ran on fails
// in dispatch and in combine: a row or an output of another call is caught.
func TestGenerationsAreToldApart(t *testing.T) {
	for _, dt := range []config.DispatchDtype{config.DtypeBF16, config.DtypeFP8E4M3} {
		in := randomInput(t, 1, dt, config.RankLocalReduce)
		in.Generation = 2
		o := buildOutputs(t, in)
		if rep := Check(in, o); !rep.DispatchOK || !rep.CombineOK {
			t.Fatalf("%v, generation 2 against itself: %s", dt, rep.First)
		}
		for _, other := range []int{0, 1, 3} {
			in.Generation = other
			rep := Check(in, o)
			if rep.DispatchOK || rep.CombineOK {
				t.Errorf("%v: generation 2's outputs pass as generation %d's (dispatch %v, combine %v)", dt, other, rep.DispatchOK, rep.CombineOK)
			}
		}
	}
}
