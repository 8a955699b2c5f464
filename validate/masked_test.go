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
// output, token by token, in every combine mode; the dispatch is not
// checked.
func TestActiveLeavesMaskedRanksOut(t *testing.T) {
	for _, c := range []struct {
		mode      config.CombineMode
		rankMajor bool
	}{{config.RankLocalReduce, false}, {config.DirectSend, false}, {config.RankLocalReduce, true}} {
		// Top-2 of 4 experts on 2 ranks: tokens on either rank alone and on
		// both.
		shape := ll.Shape{Ranks: 2, Rank: 0, Tokens: 16, Hidden: 256, TopK: 2, Experts: 4, RankMajor: c.rankMajor}
		tables, err := RoutingTopK(shape, 7, 0)
		require.NoError(t, err)
		in := Input{Shape: shape, Dtype: config.DtypeBF16, Mode: c.mode, TopK: tables}
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
				assert.Equal(t, fullRow, row, "%v rm=%v token %d", c.mode, c.rankMajor, tok)
				own++
			case !here: // every term left out: +0
				assert.Equal(t, make([]uint16, H), row, "%v rm=%v token %d", c.mode, c.rankMajor, tok)
				onlyPeer++
			default:
				assert.NotEqual(t, fullRow, row, "%v rm=%v token %d", c.mode, c.rankMajor, tok)
				mixed++
			}
		}
		require.True(t, mixed > 0 && onlyPeer > 0 && own > 0, "%v: the routing covers every case: %d %d %d", c.mode, mixed, onlyPeer, own)

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
		assert.False(t, Check(in, o).DispatchOK, "without a mask the dispatch is checked")

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

func TestMaskedValidator(t *testing.T) {
	in := randomInput(t, 0, config.DtypeFP8E4M3, config.RankLocalReduce)
	cfg := &config.Config{Seed: 7, DispatchDtype: in.Dtype, CombineMode: in.Mode}
	o := buildOutputs(t, in)
	v := MaskedValidator(in.Shape, cfg)
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
