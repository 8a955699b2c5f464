package cpuref

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/validate"
)

// jobShapes are sized for every job size (experts divisible by 1, 2 and 4).
var jobShapes = []ll.Shape{
	{Tokens: 32, Hidden: 1024, TopK: 4, Experts: 16},
	{Tokens: 1, Hidden: 256, TopK: 4, Experts: 8},
	{Tokens: 7, Hidden: 256, TopK: 1, Experts: 4},
	{Tokens: 5, Hidden: 384, TopK: 8, Experts: 8},
}

func onWorld(shape ll.Shape) ll.Shape {
	shape.Ranks, shape.Rank = mpi.World().Size(), mpi.World().Rank()
	return shape
}

// runOnce runs Poison, Dispatch(j), Combine(j), Sync and returns the outputs.
func runOnce(b *Backend, j int) (*ll.Outputs, error) {
	for _, step := range []func() error{func() error { return b.Poison(true) }, func() error { return b.Dispatch(j) }, func() error { return b.Combine(j) }, b.Sync} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return outputs(b)
}

func TestMPIDispatchCombineValidate(t *testing.T) {
	needMPI(t)
	onMPI(func() {
		comm := mpi.World()
		for _, base := range jobShapes {
			shape := onWorld(base)
			for _, dtype := range dtypes {
				for _, mode := range modes {
					name := fmt.Sprintf("R=%d T=%d H=%d K=%d E=%d %v %v", shape.Ranks, shape.Tokens, shape.Hidden, shape.TopK, shape.Experts, dtype, mode)
					checkJob(t, comm, name, shape, testConfig(dtype, mode, 2))
				}
			}
		}
	})
}

func checkJob(t *testing.T, comm *mpi.Comm, name string, shape ll.Shape, cfg *config.Config) {
	b, err := New(comm, shape, cfg)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	defer b.Close()
	for j := range 2 {
		// Routing 1 runs on a generation of high-entropy rows.
		gen := 5 * j
		if err := b.Generation(gen); err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		outs, err := runOnce(b, j)
		if err != nil {
			t.Errorf("%s routing %d: %v", name, j, err)
			return
		}
		local, _ := b.TopK(j)
		all, err := comm.AllgatherInt64(local)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		if regen, err := validate.RoutingTopK(shape, cfg.Seed, j); err != nil || !slices.Equal(regen, all) {
			t.Errorf("%s routing %d: gathered topk_idx differs from the regenerated one (%v)", name, j, err)
		}
		in := validate.Input{Shape: shape, Dtype: cfg.DispatchDtype, Mode: cfg.CombineMode, TopK: all, Weights: b.Weights(),
			Generation: gen}
		rep := validate.Check(in, outs)
		gd, gc, err := bench.GlobalVerdicts(comm, rep.DispatchOK, rep.CombineOK)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		if !rep.DispatchOK || !rep.CombineOK {
			t.Errorf("%s routing %d: %s", name, j, rep.First)
		}
		if !gd || !gc {
			t.Errorf("%s routing %d: global verdict dispatch=%v combine=%v", name, j, gd, gc)
		}
		// ep_bench's bound holds for its own rows; FP8 quantises the
		// high-entropy rows of a generation more coarsely.
		bound := 1e-5
		if gen != 0 && cfg.DispatchDtype == config.DtypeFP8E4M3 {
			bound = 1e-3
		}
		if math.IsNaN(rep.CalcDiff) || rep.CalcDiff > bound {
			t.Errorf("%s routing %d: calc_diff %v above %v", name, j, rep.CalcDiff, bound)
		}
		if msg := canonicalOrder(shape, outs); msg != "" {
			t.Errorf("%s routing %d: %s", name, j, msg)
		}
		again, err := runOnce(b, j)
		if err != nil {
			t.Errorf("%s routing %d, second run: %v", name, j, err)
			return
		}
		if !slices.Equal(again.Out, outs.Out) || !slices.Equal(again.RecvX, outs.RecvX) || !slices.Equal(again.RecvFP8, outs.RecvFP8) {
			t.Errorf("%s routing %d: a second run gave other bits", name, j)
		}
	}
}

// canonicalOrder checks the CPU reference's own promise: inside each local
// expert, source ranks ascending and tokens ascending within a source.
func canonicalOrder(s ll.Shape, o *ll.Outputs) string {
	L, RT := s.LocalExperts(), s.Ranks*s.Tokens
	for l := 0; l < L; l++ {
		next := int64(0)
		for src := 0; src < s.Ranks; src++ {
			v := o.LayoutRange[l*s.Ranks+src]
			begin, n := v>>32, v&0xffffffff
			if begin != next {
				return fmt.Sprintf("local expert %d: source rank %d begins at %d, want %d", l, src, begin, next)
			}
			for i := begin + 1; i < begin+n; i++ {
				if o.SrcInfo[l*RT+int(i)] <= o.SrcInfo[l*RT+int(i)-1] {
					return fmt.Sprintf("local expert %d: tokens of source rank %d not ascending at row %d", l, src, i)
				}
			}
			next = begin + n
		}
	}
	return ""
}

// TestMPICorruptionIsCaught corrupts one element of real outputs at a time:
// validation must fail and name where.
func TestMPICorruptionIsCaught(t *testing.T) {
	needMPI(t)
	onMPI(func() {
		shape := onWorld(jobShapes[0])
		for _, dtype := range dtypes {
			b, err := New(mpi.World(), shape, testConfig(dtype, config.RankLocalReduce, 1))
			if err != nil {
				t.Errorf("%v: %v", dtype, err)
				continue
			}
			outs, err := runOnce(b, 0)
			if err != nil {
				t.Errorf("%v: %v", dtype, err)
				continue
			}
			local, _ := b.TopK(0)
			all, err := mpi.World().AllgatherInt64(local)
			if err != nil {
				t.Errorf("%v: %v", dtype, err)
				continue
			}
			in := validate.Input{Shape: shape, Dtype: dtype, Mode: config.RankLocalReduce, TopK: all, Weights: b.Weights()}
			corruptions(t, in, outs)
			if err := b.Poison(true); err != nil {
				t.Error(err)
			}
			poisoned, _ := outputs(b)
			if rep := validate.Check(in, poisoned); rep.DispatchOK || rep.CombineOK || !math.IsNaN(rep.CalcDiff) {
				t.Errorf("%v: poisoned outputs pass: %+v", dtype, rep)
			}
			b.Close()
		}
	})
}

type corruption struct {
	name  string
	edit  func(o *ll.Outputs)
	wants []string
}

func corruptions(t *testing.T, in validate.Input, good *ll.Outputs) {
	s := in.Shape
	L, RT, H, R := s.LocalExperts(), s.Ranks*s.Tokens, s.Hidden, s.Ranks
	l := slices.IndexFunc(good.RecvCount, func(n int32) bool { return n > 1 })
	var cases []corruption
	if l >= 0 {
		e := s.Rank*L + l
		at := func(row int) string { return fmt.Sprintf("rank %d, expert %d (local %d), row %d: ", s.Rank, e, l, row) }
		expert := fmt.Sprintf("rank %d, expert %d (local %d): ", s.Rank, e, l)
		src := slices.IndexFunc(good.LayoutRange[l*R:(l+1)*R], func(v int64) bool { return v&0xffffffff > 0 })
		cases = append(cases,
			corruption{"recv_count", func(o *ll.Outputs) { o.RecvCount[l]-- }, []string{expert + "recv_count is"}},
			corruption{"layout_range count", func(o *ll.Outputs) { o.LayoutRange[l*R+src]++ },
				[]string{expert + fmt.Sprintf("layout_range of source rank %d has count", src)}},
			corruption{"layout_range begin", func(o *ll.Outputs) { o.LayoutRange[l*R+src] += 1 << 32 }, []string{"layout_range"}},
			corruption{"src_info", func(o *ll.Outputs) { o.SrcInfo[l*RT+1] = int32(s.Tokens) },
				[]string{at(1) + fmt.Sprintf("src_info is token %d, outside", s.Tokens)}},
			corruption{"src_info duplicate", func(o *ll.Outputs) { o.SrcInfo[l*RT+1] = o.SrcInfo[l*RT] }, []string{at(1)}},
		)
		if in.Dtype == config.DtypeFP8E4M3 {
			cases = append(cases,
				corruption{"fp8 byte", func(o *ll.Outputs) { o.RecvFP8[(l*RT+1)*H+9] ^= 0x01 }, []string{at(1) + "column 9 is E4M3"}},
				corruption{"fp8 scale", func(o *ll.Outputs) { o.RecvScales[(l*RT+1)*H/128] *= 2 }, []string{at(1) + "scale of columns [0, 128)"}},
			)
		} else {
			cases = append(cases,
				corruption{"row byte", func(o *ll.Outputs) { o.RecvX[(l*RT+1)*H+9] ^= 0x0100 }, []string{at(1) + "column 9 is"}},
				corruption{"token id column", func(o *ll.Outputs) { o.RecvX[(l*RT+1)*H+H-1] ^= 0x0001 }, []string{at(1) + fmt.Sprintf("column %d is", H-1)}},
			)
		}
	} else {
		t.Logf("rank %d: no local expert with two rows; row corruptions skipped", s.Rank)
	}
	tok, col := s.Tokens-1, H/2+3
	cases = append(cases, corruption{"combine output", func(o *ll.Outputs) { o.Out[tok*H+col] ^= 0x0004 },
		[]string{fmt.Sprintf("rank %d, token %d, column %d: got ", s.Rank, tok, col)}})

	for _, c := range cases {
		o := deepCopy(good)
		c.edit(o)
		rep := validate.Check(in, o)
		if rep.DispatchOK && rep.CombineOK {
			t.Errorf("%v %s: corruption not detected", in.Dtype, c.name)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(rep.First, w) {
				t.Errorf("%v %s: failure %q lacks %q", in.Dtype, c.name, rep.First, w)
			}
		}
	}
}

// deepCopy is o with every output copied, so that a test may spoil one.
func deepCopy(o *ll.Outputs) *ll.Outputs {
	return &ll.Outputs{
		RecvX: slices.Clone(o.RecvX), RecvFP8: slices.Clone(o.RecvFP8), RecvScales: slices.Clone(o.RecvScales),
		RecvCount: slices.Clone(o.RecvCount), SrcInfo: slices.Clone(o.SrcInfo), LayoutRange: slices.Clone(o.LayoutRange),
		Out: slices.Clone(o.Out), RecvTopkIdx: slices.Clone(o.RecvTopkIdx), RecvTopkWeights: slices.Clone(o.RecvTopkWeights),
	}
}

// TestMPICombineModesDiffer: with more than one rank the two combine orders
// round differently somewhere; on one rank they are the same sum.
func TestMPICombineModesDiffer(t *testing.T) {
	needMPI(t)
	onMPI(func() {
		shape := onWorld(jobShapes[0])
		var out [2][]uint16
		for i, mode := range modes {
			b, err := New(mpi.World(), shape, testConfig(config.DtypeBF16, mode, 1))
			if err != nil {
				t.Error(err)
				return
			}
			o, err := runOnce(b, 0)
			if err != nil {
				t.Error(err)
				return
			}
			out[i] = o.Out
			b.Close()
		}
		differ := int64(0)
		for i := range out[0] {
			if out[0][i] != out[1][i] {
				differ++
			}
		}
		total, err := mpi.World().AllreduceInt64([]int64{differ}, mpi.Sum)
		if err != nil {
			t.Error(err)
			return
		}
		switch {
		case shape.Ranks == 1 && total[0] != 0:
			t.Errorf("one rank: the modes differ in %d elements", total[0])
		case shape.Ranks > 1 && total[0] == 0:
			t.Errorf("%d ranks: rank_local_reduce and direct_send gave identical bits", shape.Ranks)
		}
		t.Logf("%d ranks: %d elements differ between the combine modes", shape.Ranks, total[0])
	})
}

// TestMPIAllocations: Dispatch and Combine allocate no more than the three
// bounded exchanges they make do inside package mpi.
func TestMPIAllocations(t *testing.T) {
	needMPI(t)
	onMPI(func() {
		comm := mpi.World()
		R := comm.Size()
		one, displs := make([]int, R), make([]int, R)
		for q := range R {
			one[q], displs[q] = 1, q
		}
		send, recv := make([]byte, R), make([]byte, R)
		perCall := testing.AllocsPerRun(5, func() {
			if _, err := comm.AlltoallvDeadline(send, one, displs, recv, one, displs, 99, time.Now().Add(time.Minute)); err != nil {
				t.Error(err)
			}
		})
		shape := onWorld(jobShapes[0])
		for _, mode := range modes {
			b, err := New(comm, shape, testConfig(config.DtypeFP8E4M3, mode, 1))
			if err != nil {
				t.Error(err)
				return
			}
			got := testing.AllocsPerRun(5, func() {
				if err := b.Dispatch(0); err != nil {
					t.Error(err)
				}
				if err := b.Combine(0); err != nil {
					t.Error(err)
				}
			})
			t.Logf("%v: %v allocations per dispatch+combine, %v per exchange", mode, got, perCall)
			if got > 3*perCall {
				t.Errorf("%v: %v allocations per dispatch+combine, the three exchanges make %v", mode, got, 3*perCall)
			}
			b.Close()
		}
		// Timing: marks around a dispatch give a positive duration.
		b, err := New(comm, shape, testConfig(config.DtypeBF16, config.RankLocalReduce, 1))
		if err != nil {
			t.Error(err)
			return
		}
		defer b.Close()
		if err := errorsOf(b.Mark(0), b.Dispatch(0), b.Mark(1), b.Combine(0), b.Mark(2), b.Sync()); err != nil {
			t.Error(err)
			return
		}
		d, err1 := b.ElapsedUs(0, 1)
		c, err2 := b.ElapsedUs(1, 2)
		if err1 != nil || err2 != nil || d <= 0 || c <= 0 {
			t.Errorf("dispatch %v us (%v), combine %v us (%v)", d, err1, c, err2)
		}
	})
}

func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
