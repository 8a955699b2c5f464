package kernels

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Phase names of the stamps EPBENCH_TRACE(a, i) records in ll.cu, index i
// (below TracePoints). "inline own parts": worker warp 1 computed its
// own-rank items. "rows summed": the block's source warp 0 is about to store
// its first item; a block whose first item's only term is the own partial
// (written by the worker warp, only_own_term) records none, so at one rank
// the inline combine has no such line.
var (
	DispatchPhases = []string{"start", "sent", "signalled", "sources arrived", "end", "rows sent", "own rows"}
	CombinePhases  = []string{"start", "peer partials sent", "signalled", "inline own parts", "ranks arrived", "end", "rows summed"}
)

// stamp is block b's stamp of phase i in a call's stamps (0: not recorded).
func stamp(raw []byte, b, i int) uint64 {
	return binary.LittleEndian.Uint64(raw[8*(b*TracePoints+i):])
}

// TraceSummary prints, per phase, the min/avg/max over blocks of the time
// since the earliest block started, phases in the order of their averages
// (a timeline: the stamps' indices are not in time order).
func TraceSummary(w io.Writer, rank int, kernel string, phases []string, raw []byte, grid int) {
	t0 := uint64(math.MaxUint64)
	for b := 0; b < grid; b++ {
		if s := stamp(raw, b, 0); s != 0 && s < t0 {
			t0 = s
		}
	}
	if t0 == math.MaxUint64 {
		return
	}
	type row struct {
		name        string
		n           int
		lo, avg, hi float64
	}
	var rows []row
	for i, name := range phases {
		lo, hi, sum, n := math.Inf(1), 0.0, 0.0, 0
		for b := 0; b < grid; b++ {
			s := stamp(raw, b, i)
			if s == 0 || s < t0 {
				continue
			}
			us := float64(s-t0) / 1000
			lo, hi, sum, n = math.Min(lo, us), math.Max(hi, us), sum+us, n+1
		}
		if n > 0 {
			rows = append(rows, row{name, n, lo, sum / float64(n), hi})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].avg < rows[j].avg })
	for _, r := range rows {
		fmt.Fprintf(w, "epbench: trace rank %d %s %-16s blocks %3d  min %7.2f  avg %7.2f  max %7.2f us\n",
			rank, kernel, r.name, r.n, r.lo, r.avg, r.hi)
	}
}

// TraceSpan is the earliest start stamp and the latest stamp of any phase
// of one call (globaltimer ns), 0, 0 when none was recorded.
func TraceSpan(raw []byte, grid int) (start, end uint64) {
	for b := 0; b < grid; b++ {
		for i := 0; i < TracePoints; i++ {
			s := stamp(raw, b, i)
			if s == 0 {
				continue
			}
			if i == 0 && (start == 0 || s < start) {
				start = s
			}
			end = max(end, s)
		}
	}
	return start, end
}

// TraceBlocks prints, for each phase, whether the same blocks reach it late
// call after call: over the calls in slots (each a call's stamps, grid
// blocks), the spread between a call's earliest and latest block (average over
// the calls), the range of the blocks' mean times (since their call's start),
// the correlation of the blocks' means over the first and the second half of
// the calls (near 1: a block's lateness is its own, as an SM's position would
// make it; near 0: it changes from call to call), the same over the later half
// of the blocks alone, and the blocks latest on average. Only blocks that
// reached the phase in every call count; a phase with fewer than two such
// blocks, or fewer than two calls, is left out.
func TraceBlocks(w io.Writer, rank int, kernel string, phases []string, slots [][]byte, grid int) {
	if len(slots) < 2 {
		return
	}
	starts := make([]uint64, len(slots))
	for c, raw := range slots {
		starts[c], _ = TraceSpan(raw, grid)
	}
	for i, name := range phases {
		var blocks []int
		for b := 0; b < grid; b++ {
			all := true
			for c, raw := range slots {
				if s := stamp(raw, b, i); s == 0 || s < starts[c] || starts[c] == 0 {
					all = false
					break
				}
			}
			if all {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) < 2 {
			continue
		}
		at := func(c, b int) float64 { return float64(stamp(slots[c], b, i)-starts[c]) / 1000 }
		mean := func(b, from, to int) float64 {
			s := 0.0
			for c := from; c < to; c++ {
				s += at(c, b)
			}
			return s / float64(to-from)
		}
		spread := 0.0
		for c := range slots {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, b := range blocks {
				lo, hi = math.Min(lo, at(c, b)), math.Max(hi, at(c, b))
			}
			spread += hi - lo
		}
		spread /= float64(len(slots))
		half := len(slots) / 2
		all, first, second := make([]float64, len(blocks)), make([]float64, len(blocks)), make([]float64, len(blocks))
		for j, b := range blocks {
			all[j], first[j], second[j] = mean(b, 0, len(slots)), mean(b, 0, half), mean(b, half, len(slots))
		}
		order := make([]int, len(blocks))
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(x, y int) bool { return all[order[x]] > all[order[y]] })
		var late []string
		for _, j := range order[:min(4, len(order))] {
			late = append(late, fmt.Sprintf("%d (%.2f)", blocks[j], all[j]))
		}
		lo, hi := all[order[len(order)-1]], all[order[0]]
		// The later half of the blocks (by mean) alone: blocks without work,
		// early in every call, would make r high by themselves.
		var lf, ls []float64
		for _, j := range order[:(len(order)+1)/2] {
			lf, ls = append(lf, first[j]), append(ls, second[j])
		}
		fmt.Fprintf(w, "epbench: trace rank %d %s %-16s %d calls, %3d blocks: spread in a call %.2f us, block means %.2f..%.2f us, halves r %.2f (later half of the blocks %.2f); latest %s\n",
			rank, kernel, name, len(slots), len(blocks), spread, lo, hi, correlation(first, second), correlation(lf, ls), strings.Join(late, ", "))
	}
}

// correlation is Pearson's r of x and y (0 where either is constant).
func correlation(x, y []float64) float64 {
	n := float64(len(x))
	mx, my := 0.0, 0.0
	for i := range x {
		mx += x[i] / n
		my += y[i] / n
	}
	sxy, sxx, syy := 0.0, 0.0, 0.0
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}
