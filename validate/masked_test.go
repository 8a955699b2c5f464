package validate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
)

// -T's masked step: a masked rank's terms are left out of the expected
// output, token by token, in every combine mode and dtype; the dispatch is
// not checked.
func TestActiveLeavesMaskedRanksOut(t *testing.T) {
	type mode struct {
		mode      config.CombineMode
		rankMajor bool
	}
	for _, c := range []struct {
		mode
		dtype config.DispatchDtype
	}{
		{mode{config.RankLocalReduce, false}, config.DtypeBF16}, {mode{config.DirectSend, false}, config.DtypeBF16},
		{mode{config.RankLocalReduce, true}, config.DtypeBF16}, {mode{config.RankLocalReduce, false}, config.DtypeFP8E4M3},
		{mode{config.DirectSend, false}, config.DtypeFP8E4M3}, {mode{config.RankLocalReduce, true}, config.DtypeFP8E4M3},
	} {
		// Top-2 of 4 experts on 2 ranks: tokens on either rank alone and on
		// both.
		shape := ll.Shape{Ranks: 2, Rank: 0, Tokens: 16, Hidden: 256, TopK: 2, Experts: 4, RankMajor: c.rankMajor}
		tables, err := RoutingTopK(shape, 7, 0)
		require.NoError(t, err)
		in := Input{Shape: shape, Dtype: c.dtype, Mode: c.mode.mode, TopK: tables}
		s := in.Shape
		L, H := s.LocalExperts(), s.Hidden
		full, err := ExpectedOut(in)
		require.NoError(t, err)
		masked := in
		masked.Active = []bool{true, false}
		got, err := ExpectedOut(masked)
		require.NoError(t, err)
		var mixed, onlyPeer, own int
		for tok := 0; tok < s.Own(); tok++ {
			here, peer := false, false
			for _, e := range in.topk(0, tok) {
				if e >= 0 {
					here = here || int(e)/L == 0
					peer = peer || int(e)/L == 1
				}
			}
			row, fullRow := got[tok*H:(tok+1)*H], full[tok*H:(tok+1)*H]
			switch {
			case !peer: // nothing left out
				assert.Equal(t, fullRow, row, "%+v token %d", c, tok)
				own++
			case !here: // every term left out: +0
				assert.Equal(t, make([]uint16, H), row, "%+v token %d", c, tok)
				onlyPeer++
			default:
				assert.NotEqual(t, fullRow, row, "%+v token %d", c, tok)
				mixed++
			}
		}
		require.True(t, mixed > 0 && onlyPeer > 0 && own > 0, "%+v: the routing covers every case: %d %d %d", c, mixed, onlyPeer, own)

		// An output computed without the mask fails the masked check, the
		// masked one passes it, and the dispatch is not looked at.
		o := buildOutputs(t, in)
		o.RecvCount[0]++
		rep := Check(masked, o)
		assert.True(t, rep.DispatchOK)
		assert.False(t, rep.CombineOK)
		assert.True(t, strings.HasPrefix(rep.First, "rank 0, token "), rep.First)
		o.Out = got
		rep = Check(masked, o)
		assert.True(t, rep.DispatchOK && rep.CombineOK, "%+v", rep)
		// ep_bench's reference leaves the masked weights out too: the
		// masked output matches it as closely as an unmasked one does.
		assert.Less(t, rep.CalcDiff, 1e-3, "%+v", c)
		assert.False(t, Check(in, o).DispatchOK, "without a mask the dispatch is checked")
		// SkipCombine (-D) does not skip a masked combine's check.
		skip := masked
		skip.SkipCombine = true
		o.Out = full
		assert.False(t, Check(skip, o).CombineOK, "%+v: a masked check with SkipCombine", c)

		// A mask of every rank active is no mask.
		all := in
		all.Active = []bool{true, true}
		got, err = ExpectedOut(all)
		require.NoError(t, err)
		assert.Equal(t, full, got)
	}
}

func TestActiveRejectsBadMasks(t *testing.T) {
	in := randomInput(t, 1, config.DtypeBF16, config.RankLocalReduce)
	o := buildOutputs(t, in)
	in.Active = []bool{true}
	rep := Check(in, o)
	assert.False(t, rep.DispatchOK || rep.CombineOK)
	assert.Contains(t, rep.First, "a mask of 1 ranks in a job of 2")
	in.Active = []bool{true, false}
	rep = Check(in, o)
	assert.False(t, rep.CombineOK)
	assert.Contains(t, rep.First, "rank 1 is masked in the mask it is checked with")
}

func TestValidatorWithAMask(t *testing.T) {
	in := randomInput(t, 0, config.DtypeFP8E4M3, config.RankLocalReduce)
	cfg := &config.Config{Seed: 7, DispatchDtype: in.Dtype, CombineMode: in.Mode}
	o := buildOutputs(t, in)
	v := Validator(in.Shape, cfg)
	c, err := v(o, 0, 0, nil)
	require.NoError(t, err)
	assert.True(t, c.DispatchOK && c.CombineOK, "no mask: the ordinary check, %+v", c)
	c, err = v(o, 0, 0, []bool{true, false})
	require.NoError(t, err)
	assert.True(t, c.DispatchOK)
	assert.False(t, c.CombineOK, "the unmasked output under a mask")
	masked := in
	masked.Active = []bool{true, false}
	o.Out, err = ExpectedOut(masked)
	require.NoError(t, err)
	c, err = v(o, 0, 0, []bool{true, false})
	require.NoError(t, err)
	assert.True(t, c.CombineOK, "%+v", c)
}

// A masked rank in the middle is skipped, not an end: at 4 ranks with ranks
// 1 and 3 masked (as in the test), ranks 0 and 2 still add each other's
// terms, in order.
func TestActiveSkipsMaskedRanksBetween(t *testing.T) {
	for _, m := range []struct {
		mode      config.CombineMode
		rankMajor bool
	}{{config.RankLocalReduce, false}, {config.DirectSend, false}, {config.RankLocalReduce, true}} {
		shape := ll.Shape{Ranks: 4, Rank: 2, Tokens: 24, Hidden: 256, TopK: 3, Experts: 8, RankMajor: m.rankMajor}
		tables, err := RoutingTopK(shape, 11, 0)
		require.NoError(t, err)
		in := Input{Shape: shape, Dtype: config.DtypeBF16, Mode: m.mode, TopK: tables, Active: []bool{true, false, true, false}}
		got, err := ExpectedOut(in)
		require.NoError(t, err)
		// The same tokens with the masked ranks' selections removed from
		// the routing (-1), and no mask: the same sums.
		stripped := in
		stripped.Active = nil
		stripped.TopK = append([]int64(nil), tables...)
		L := shape.LocalExperts()
		for i, e := range stripped.TopK {
			if e >= 0 && (int(e)/L == 1 || int(e)/L == 3) {
				stripped.TopK[i] = -1
			}
		}
		want, err := ExpectedOut(stripped)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%+v", m)
		full := in
		full.Active = nil
		all, err := ExpectedOut(full)
		require.NoError(t, err)
		assert.NotEqual(t, all, got, "%+v: the mask leaves something out", m)
		var both int
		for tok := 0; tok < shape.Own(); tok++ {
			var zero, two bool
			for _, e := range in.topk(2, tok) {
				zero = zero || e >= 0 && int(e)/L == 0
				two = two || e >= 0 && int(e)/L == 2
			}
			if zero && two {
				both++
			}
		}
		require.Positive(t, both, "%+v: tokens with terms of ranks 0 and 2", m)
	}
}

// With -D the mask test's combine output is checked all the same: the
// step runs a combine either way.
func TestValidatorWithAMaskDispatchOnly(t *testing.T) {
	in := randomInput(t, 0, config.DtypeBF16, config.RankLocalReduce)
	cfg := &config.Config{Seed: 7, DispatchDtype: in.Dtype, CombineMode: in.Mode, DispatchOnly: true}
	o := buildOutputs(t, in)
	o.Out[3] ^= 1
	v := Validator(in.Shape, cfg)
	c, err := v(o, 0, 0, []bool{true, true})
	require.NoError(t, err)
	assert.False(t, c.CombineOK, "a wrong output passed")
	c, err = v(o, 0, 0, nil)
	require.NoError(t, err)
	assert.True(t, c.CombineOK, "without a mask -D leaves the combine unchecked")
}
