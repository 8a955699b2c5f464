package kernels

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
)

// Phase names of the stamps EPBENCH_TRACE(a, i) records in ll.cu, index i
// (below TracePoints). "inline own parts": worker warp 1 computed its
// own-rank items.
var (
	DispatchPhases = []string{"start", "sent", "signalled", "sources arrived", "end", "rows sent", "own rows"}
	CombinePhases  = []string{"start", "peer partials sent", "signalled", "inline own parts", "ranks arrived", "end", "rows summed"}
)

// TraceSummary prints, per phase, the min/avg/max over blocks of the time
// since the earliest block started, phases in the order of their averages
// (a timeline: the stamps' indices are not in time order).
func TraceSummary(w io.Writer, rank int, kernel string, phases []string, raw []byte, grid int) {
	stamp := func(b, i int) uint64 {
		return binary.LittleEndian.Uint64(raw[8*(b*TracePoints+i):])
	}
	t0 := uint64(math.MaxUint64)
	for b := 0; b < grid; b++ {
		if s := stamp(b, 0); s != 0 && s < t0 {
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
			s := stamp(b, i)
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
			s := binary.LittleEndian.Uint64(raw[8*(b*TracePoints+i):])
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
