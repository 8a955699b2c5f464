package cpuref

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/epbench/epbench/bf16"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
	"github.com/epbench/epbench/validate"
)

func testConfig(dtype config.DispatchDtype, mode config.CombineMode, reroute int) *config.Config {
	return &config.Config{DispatchDtype: dtype, CombineMode: mode, Seed: 1, Reroute: reroute}
}

var (
	dtypes = []config.DispatchDtype{config.DtypeBF16, config.DtypeFP8E4M3}
	modes  = []config.CombineMode{config.RankLocalReduce, config.DirectSend}
)

func TestNewRejectsBadShapes(t *testing.T) {
	good := ll.Shape{Ranks: 1, Rank: 0, Tokens: 4, Hidden: 256, TopK: 2, Experts: 4}
	cfg := testConfig(config.DtypeBF16, config.RankLocalReduce, 1)
	cases := []struct {
		name string
		comm Exchanger
		edit func(s *ll.Shape, c *config.Config)
		want string
	}{
		{"no comm", nil, nil, "cpuref: no communicator"},
		{"ranks", loopback{}, func(s *ll.Shape, c *config.Config) { s.Ranks = 2 }, "shape has 2 ranks, the communicator 1"},
		{"rank", loopback{}, func(s *ll.Shape, c *config.Config) { s.Rank = 1 }, "shape is for rank 1"},
		{"hidden 128", loopback{}, func(s *ll.Shape, c *config.Config) { s.Hidden = 128 }, "hidden 128 must be a multiple of 128 in [256, 16384]"},
		{"hidden 300", loopback{}, func(s *ll.Shape, c *config.Config) { s.Hidden = 300 }, "hidden 300"},
		{"tokens", loopback{}, func(s *ll.Shape, c *config.Config) { s.Tokens = 0 }, "tokens 0 outside"},
		{"top-k", loopback{}, func(s *ll.Shape, c *config.Config) { s.TopK = 5 }, "top-k 5 outside [1, min(32, experts 4)]"},
		{"experts", loopback{}, func(s *ll.Shape, c *config.Config) { s.Experts = 0 }, "experts 0"},
		{"dtype", loopback{}, func(s *ll.Shape, c *config.Config) { c.DispatchDtype = 7 }, "unsupported dispatch dtype"},
		{"mode", loopback{}, func(s *ll.Shape, c *config.Config) { c.CombineMode = 7 }, "unsupported combine mode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, cf := good, *cfg
			if c.edit != nil {
				c.edit(&s, &cf)
			}
			_, err := New(c.comm, s, &cf)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
	if _, err := New(loopback{}, good, nil); err == nil {
		t.Fatal("nil config accepted")
	}
}

func TestLifecycleErrors(t *testing.T) {
	shape := ll.Shape{Ranks: 1, Tokens: 4, Hidden: 256, TopK: 2, Experts: 4}
	b, err := New(loopback{}, shape, testConfig(config.DtypeBF16, config.DirectSend, 2))
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "cpu" || b.Routings() != 2 {
		t.Errorf("name %q, routings %d", b.Name(), b.Routings())
	}
	if err := b.Combine(0); err == nil || !strings.Contains(err.Error(), "before a successful dispatch") {
		t.Errorf("combine before dispatch: %v", err)
	}
	if err := b.Dispatch(2); err == nil || !strings.Contains(err.Error(), "routing 2 outside [0, 2)") {
		t.Errorf("dispatch of routing 2: %v", err)
	}
	if err := b.Dispatch(0); err != nil {
		t.Fatal(err)
	}
	if err := b.Combine(1); err == nil || !strings.Contains(err.Error(), "combine of routing 1 after the dispatch of routing 0") {
		t.Errorf("combine of another routing: %v", err)
	}
	if _, err := b.ElapsedUs(0, 1); err == nil || !strings.Contains(err.Error(), "never recorded") {
		t.Errorf("elapsed without marks: %v", err)
	}
	if err := b.Mark(4); err == nil {
		t.Error("mark 4 accepted")
	}
	for i := range 4 {
		if err := b.Mark(i); err != nil {
			t.Fatal(err)
		}
	}
	if us, err := b.ElapsedUs(0, 3); err != nil || us < 0 {
		t.Errorf("elapsed %v, %v", us, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"dispatch": b.Dispatch(0), "combine": b.Combine(0), "sync": b.Sync(), "poison": b.Poison(true), "mark": b.Mark(0)} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	if _, err := b.Snapshot(); !errors.Is(err, ErrClosed) {
		t.Errorf("outputs after Close: %v", err)
	}
}

// TestNoAllocation: after New, Dispatch and Combine allocate nothing.
func TestNoAllocation(t *testing.T) {
	shape := ll.Shape{Ranks: 1, Tokens: 16, Hidden: 256, TopK: 4, Experts: 8}
	for _, dtype := range dtypes {
		for _, mode := range modes {
			b, err := New(loopback{}, shape, testConfig(dtype, mode, 2))
			if err != nil {
				t.Fatal(err)
			}
			j := 0
			allocs := testing.AllocsPerRun(10, func() {
				if err := b.Mark(0); err != nil {
					t.Fatal(err)
				}
				if err := b.Dispatch(j); err != nil {
					t.Fatal(err)
				}
				if err := b.Combine(j); err != nil {
					t.Fatal(err)
				}
				if err := b.Mark(1); err != nil {
					t.Fatal(err)
				}
				j = 1 - j
			})
			if allocs != 0 {
				t.Errorf("%v %v: %v allocations per dispatch+combine, want 0", dtype, mode, allocs)
			}
		}
	}
}

// runGroup runs Dispatch and Combine of routing j on every rank of an
// in-process group and returns each rank's outputs. prepare may adjust a
// backend (its routing) before the run.
func runGroup(t *testing.T, shape ll.Shape, cfg *config.Config, j int, prepare func(b *Backend)) []*ll.Outputs {
	t.Helper()
	group := newChanGroup(shape.Ranks)
	outs := make([]*ll.Outputs, shape.Ranks)
	errs := make([]error, shape.Ranks)
	var wg sync.WaitGroup
	for r := range group {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := shape
			s.Rank = r
			b, err := New(group[r], s, cfg)
			if err == nil {
				if prepare != nil {
					prepare(b)
				}
				err = errors.Join(b.Poison(true), b.Dispatch(j), b.Combine(j), b.Sync())
			}
			if err == nil {
				outs[r], err = outputs(b)
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return outs
}

// checkGroup checks every rank's outputs of routing j, run on the token
// rows of generation gen, with package validate (which also checks the
// combine output's size); name says which job they came from.
func checkGroup(t *testing.T, name string, shape ll.Shape, cfg *config.Config, j, gen int, outs []*ll.Outputs) {
	t.Helper()
	all, err := validate.RoutingTopK(shape, cfg.Seed, j)
	if err != nil {
		t.Fatal(err)
	}
	for r, o := range outs {
		s := shape
		s.Rank = r
		in := validate.Input{Shape: s, Dtype: cfg.DispatchDtype, Mode: cfg.CombineMode, TopK: all, Generation: gen}
		if rep := validate.Check(in, o); !rep.DispatchOK || !rep.CombineOK {
			t.Errorf("%s, routing %d, rank %d: %s", name, j, r, rep.First)
		}
	}
}

// TestInProcessGroupValidates runs small jobs with goroutine ranks and
// checks every rank with package validate.
func TestInProcessGroupValidates(t *testing.T) {
	shapes := []ll.Shape{
		{Ranks: 1, Tokens: 5, Hidden: 256, TopK: 3, Experts: 4},
		{Ranks: 2, Tokens: 9, Hidden: 256, TopK: 4, Experts: 8},
		{Ranks: 4, Tokens: 6, Hidden: 384, TopK: 3, Experts: 8},
		{Ranks: 3, Tokens: 1, Hidden: 256, TopK: 1, Experts: 3},
	}
	for _, shape := range shapes {
		for _, dtype := range dtypes {
			for _, mode := range modes {
				cfg := testConfig(dtype, mode, 2)
				for j := range 2 {
					checkGroup(t, fmt.Sprintf("%+v %v %v", shape, dtype, mode), shape, cfg, j, 0, runGroup(t, shape, cfg, j, nil))
				}
			}
		}
	}
}

// TestCombineOrderInBackend: two ranks, a token of rank 0 selecting experts
// on ranks 0, 1, 0 with weights 1, 2^-10, 2^-8. Its rows hold -128, so
// only the order of the additions differs: direct_send gives
// bf16(-128.625) = -129 and rank_local_reduce bf16(bf16(-128.5) - 0.125) =
// -128. The backend must produce both, bit for bit.
func TestCombineOrderInBackend(t *testing.T) {
	shape := ll.Shape{Ranks: 2, Tokens: 1, Hidden: 256, TopK: 3, Experts: 4}
	routingOf := [][]int64{{0, 2, 1}, {3, 1, -1}}
	prepare := func(b *Backend) {
		b.topk[0] = routingOf[b.rank]
		if b.rank == 0 {
			copy(b.weights, []float32{1, 0x1p-10, 0x1p-8})
		}
	}
	want := map[config.CombineMode]float32{config.DirectSend: -129, config.RankLocalReduce: -128}
	for mode, w := range want {
		outs := runGroup(t, shape, testConfig(config.DtypeBF16, mode, 1), 0, prepare)
		if got := bf16.ToFloat32(outs[0].Out[0]); got != w {
			t.Errorf("%v: out[0][0] = %v, want %v", mode, got, w)
		}
		in := validate.Input{Shape: shape, Mode: mode, TopK: []int64{0, 2, 1, 3, 1, -1}, Weights: []float32{1, 0x1p-10, 0x1p-8}}
		if rep := validate.Check(in, outs[0]); !rep.DispatchOK || !rep.CombineOK {
			t.Errorf("%v: %s", mode, rep.First)
		}
	}
}

// TestCombineRankOrderInBackend: four ranks, a token of rank 0 selecting
// one expert on each with partials -1, -2^-8, -2^-24, -2^-24 (weights 2^-7,
// 2^-15, 2^-31, 2^-31 times rows of -128). Summed in rank order the two
// small partials each vanish in a tie to even and bf16 gives -1; summed in
// reverse they add up to -2^-23, which tips the bf16 rounding to -1-2^-7.
func TestCombineRankOrderInBackend(t *testing.T) {
	shape := ll.Shape{Ranks: 4, Tokens: 1, Hidden: 256, TopK: 4, Experts: 4}
	routingOf := [][]int64{{0, 1, 2, 3}, {1, -1, -1, -1}, {2, -1, -1, -1}, {3, -1, -1, -1}}
	w := []float32{0x1p-7, 0x1p-15, 0x1p-31, 0x1p-31}
	prepare := func(b *Backend) {
		b.topk[0] = routingOf[b.rank]
		if b.rank == 0 {
			copy(b.weights, w)
		}
	}
	for _, mode := range modes {
		outs := runGroup(t, shape, testConfig(config.DtypeBF16, mode, 1), 0, prepare)
		if got := bf16.ToFloat32(outs[0].Out[0]); got != -1 {
			t.Errorf("%v: out[0][0] = %v, want -1", mode, got)
		}
	}
}

// TestCombineArithmetic applies the reduction helpers in the two orders of
// docs/DESIGN.md to the case of TestCombineOrderInBackend: a bf16 rounding
// of a partial sum changes the result.
func TestCombineArithmetic(t *testing.T) {
	y := []uint16{bf16.FromFloat32(-128)}
	w := []float32{1, 0x1p-10, 0x1p-8} // slots on ranks 0, 1, 0

	direct := []float32{0}
	for _, wk := range w {
		accumulate(direct, wk, y)
	}

	p0, p1 := []float32{0}, []float32{0}
	accumulate(p0, w[0], y)
	accumulate(p1, w[1], y)
	accumulate(p0, w[2], y)
	row := make([]byte, 2)
	local := []float32{0}
	for _, p := range [][]float32{p0, p1} {
		le.PutUint16(row, bf16.FromFloat32(p[0]))
		addBytes(local, row)
	}

	if d, l := bf16.FromFloat32(direct[0]), bf16.FromFloat32(local[0]); d == l {
		t.Fatalf("both orders give %#04x", d)
	} else if bf16.ToFloat32(d) != -129 || bf16.ToFloat32(l) != -128 {
		t.Errorf("direct_send %v, rank_local_reduce %v; want -129, -128", bf16.ToFloat32(d), bf16.ToFloat32(l))
	}

	// No fused multiply-add: with acc = -(1+2^-7), w = 1+2^-17+2^-23 and
	// y = 1+2^-7, the product rounds up to 1+2^-7+2^-17+2^-22 and the sum
	// is 2^-17+2^-22; a fused operation would give
	// 2^-17+2^-23+2^-24+2^-30.
	const yv, wv = 1 + 0x1p-7, 1 + 0x1p-17 + 0x1p-23
	acc := []float32{-yv}
	accumulate(acc, wv, []uint16{bf16.FromFloat32(yv)})
	le.PutUint16(row, bf16.FromFloat32(yv))
	acc2 := []float32{-yv}
	addWeightedBytes(acc2, wv, row)
	if want := float32(0x1p-17 + 0x1p-22); acc[0] != want || acc2[0] != want {
		t.Errorf("w*y+acc = %v, %v; want %v, each operation rounded", acc[0], acc2[0], want)
	}

	acc = []float32{0.5}
	le.PutUint16(row, bf16.FromFloat32(3))
	addWeightedBytes(acc, 0.25, row)
	if acc[0] != 1.25 {
		t.Errorf("addWeightedBytes: %v, want 1.25", acc[0])
	}
}

// --jitter-us: each operation waits the delay its rank, call and kind draw,
// at least, and the draws differ.
func TestJitterDelaysEachOperation(t *testing.T) {
	b := &Backend{rank: 3, jitter: 2 * time.Millisecond}
	seen := map[time.Duration]bool{}
	for call := uint64(1); call <= 6; call++ {
		b.calls = call
		for _, dispatch := range []bool{true, false} {
			op := uint64(0)
			if dispatch {
				op = 1
			}
			want := time.Duration(routing.SplitMix64(call<<32|3<<1|op) % uint64(b.jitter+1))
			if d := b.delay(dispatch); d != want {
				t.Errorf("call %d, dispatch %v: delay %v, want %v", call, dispatch, d, want)
			}
			start := time.Now()
			b.wait(dispatch)
			if got := time.Since(start); got < want {
				t.Errorf("call %d, dispatch %v: waited %v, want at least %v", call, dispatch, got, want)
			}
			seen[want] = true
		}
	}
	if len(seen) < 10 {
		t.Errorf("12 operations drew %d distinct delays", len(seen))
	}
	// Without jitter nothing waits (no wall-clock bound: a loaded machine
	// may pause any call).
	b.jitter = 0
	for _, dispatch := range []bool{true, false} {
		if d := b.delay(dispatch); d != 0 {
			t.Errorf("no jitter, yet a delay of %v", d)
		}
	}
}

// TestInProcessGroupSubTests runs ep_bench's sub-tests in goroutine groups
// of 2, 4 and 8 ranks and checks every rank with package validate: fewer
// tokens than the buffers hold (-l), uneven counts with a rank that
// dispatches none (-N), and the rank-major layout (-L rm), alone and with
// uneven counts. Validated pairs run on rows of their own generation.
func TestInProcessGroupSubTests(t *testing.T) {
	type sub struct {
		name      string
		counts    func(ranks int) []int
		rankMajor bool
	}
	less := func(ranks int) []int { return slices.Repeat([]int{3}, ranks) }
	uneven := func(ranks int) []int {
		c := make([]int, ranks)
		for r := range c {
			c[r] = (7 * (r + 1)) % 6
		}
		c[0], c[ranks-1] = 6, 0
		return c
	}
	subs := []sub{{"less", less, false}, {"uneven", uneven, false}, {"rank-major", nil, true}, {"rank-major uneven", uneven, true}}
	for _, ranks := range []int{2, 4, 8} {
		for _, sb := range subs {
			shape := ll.Shape{Ranks: ranks, Tokens: 6, Hidden: 256, TopK: 3, Experts: 2 * ranks, RankMajor: sb.rankMajor}
			if sb.counts != nil {
				shape.Counts = sb.counts(ranks)
			}
			for _, dtype := range dtypes {
				cfg := testConfig(dtype, config.RankLocalReduce, 2)
				for j := range 2 {
					outs := runGroup(t, shape, cfg, j, func(b *Backend) {
						if err := b.Generation(3); err != nil {
							t.Error(err)
						}
					})
					checkGroup(t, fmt.Sprintf("%s, %d ranks, %v", sb.name, ranks, dtype), shape, cfg, j, 3, outs)
				}
			}
		}
	}
}

// TestRankMajorSlots checks the rank-major layout on a routing written out:
// slots fill in token order per source, with src_info, the local top-k
// (-1 elsewhere), the weights and the per-source counts, and the combine of a
// validated pair (rows scaled by each rank's weight sum) equals the weighted
// sum. A wrong slot or count is caught.
func TestRankMajorSlots(t *testing.T) {
	shape := ll.Shape{Ranks: 2, Tokens: 3, Hidden: 256, TopK: 2, Experts: 4, RankMajor: true}
	// Rank 0 hosts experts 0 and 1, rank 1 experts 2 and 3.
	routingOf := [][]int64{{2, 0, 1, 0, 3, 2}, {1, -1, 3, 2, 0, 3}}
	prepare := func(b *Backend) {
		b.topk[0] = routingOf[b.rank]
		if err := b.Generation(1); err != nil {
			t.Error(err)
		}
	}
	outs := runGroup(t, shape, testConfig(config.DtypeBF16, config.RankLocalReduce, 1), 0, prepare)
	// Rank 1 receives rank 0's tokens 0 and 2 (token 1 selects only rank 0's
	// experts), and its own tokens 1 and 2.
	o := outs[1]
	if got := o.RecvCount; !slices.Equal(got, []int32{2, 2}) {
		t.Fatalf("rank 1 recv_count = %v, want [2 2]", got)
	}
	K, T := 2, 3
	for _, c := range []struct {
		slot, token int
		idx         []int32
	}{{0, 0, []int32{0, -1}}, {1, 2, []int32{1, 0}}, {T + 0, 1, []int32{1, 0}}, {T + 1, 2, []int32{-1, 1}}} {
		if got := o.SrcInfo[c.slot]; got != int32(c.token) {
			t.Errorf("rank 1 slot %d: src_info %d, want %d", c.slot, got, c.token)
		}
		if got := o.RecvTopkIdx[c.slot*K : (c.slot+1)*K]; !slices.Equal(got, c.idx) {
			t.Errorf("rank 1 slot %d: top-k %v, want %v", c.slot, got, c.idx)
		}
	}
	all := []int64{2, 0, 1, 0, 3, 2, 1, -1, 3, 2, 0, 3}
	for r, o := range outs {
		s := shape
		s.Rank = r
		in := validate.Input{Shape: s, Mode: config.RankLocalReduce, TopK: all, Generation: 1}
		if rep := validate.Check(in, o); !rep.DispatchOK || !rep.CombineOK {
			t.Errorf("rank %d: %s", r, rep.First)
		}
	}
	s := shape
	s.Rank = 1
	in := validate.Input{Shape: s, Mode: config.RankLocalReduce, TopK: all, Generation: 1}
	for name, spoil := range map[string]func(o *ll.Outputs){
		"count":    func(o *ll.Outputs) { o.RecvCount[0]++ },
		"src_info": func(o *ll.Outputs) { o.SrcInfo[1] = 1 },
		"top-k":    func(o *ll.Outputs) { o.RecvTopkIdx[1] = 1 },
		"weight":   func(o *ll.Outputs) { o.RecvTopkWeights[0] *= 2 },
		"row":      func(o *ll.Outputs) { o.RecvX[5] ^= 1 },
	} {
		bad := deepCopy(o)
		spoil(bad)
		if rep := validate.Check(in, bad); rep.DispatchOK {
			t.Errorf("a wrong %s passed the rank-major dispatch check", name)
		}
	}
}
