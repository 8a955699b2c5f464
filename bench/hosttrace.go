package bench

import (
	"fmt"
	"io"
	"time"
)

// HostTraceEnv turns on host stamps of the timed loop (a development aid):
// every rank records the wall clock at the points of each timed iteration,
// and rank 0 prints, per point, how much later than rank 0 each rank got
// there on average. Ranks on one host share the clock; across hosts the
// offsets include the clocks' difference.
const HostTraceEnv = "EPBENCH_HOSTTRACE"

// The points of a timed iteration that the host trace stamps.
var hostPoints = []string{
	"iteration start",   // after the previous barrier
	"dispatch launched", // start event recorded, dispatch enqueued
	"dispatch synced",   // the stream's wait returned
	"combine launched",  // events recorded, combine enqueued
	"combine synced",    // the stream's wait returned
	"barrier left",      // the iteration's barrier
}

// hostTrace holds one rank's stamps: iteration i, point k at i*len(hostPoints)+k.
type hostTrace struct {
	ns []int64
}

func newHostTrace(iters int) *hostTrace {
	return &hostTrace{ns: make([]int64, iters*len(hostPoints))}
}

// stamp records point k of iteration i; a nil trace records nothing.
func (h *hostTrace) stamp(i, k int) {
	if h != nil {
		h.ns[i*len(hostPoints)+k] = time.Now().UnixNano()
	}
}

// writeHostTrace prints, from every rank's stamps (all[r]), per point the
// mean over iterations (the first dropped when there are more) of each
// rank's stamp minus rank 0's, and each rank's mean time since the previous
// point.
func writeHostTrace(w io.Writer, all [][]int64) {
	n := len(hostPoints)
	if len(all) == 0 || len(all[0]) < n {
		return
	}
	iters := len(all[0]) / n
	first := 0
	if iters > 1 {
		first = 1
	}
	count := float64(iters - first)
	for k, name := range hostPoints {
		line := fmt.Sprintf("epbench: host trace %-18s", name)
		for r := range all {
			var late, step float64
			for i := first; i < iters; i++ {
				late += float64(all[r][i*n+k] - all[0][i*n+k])
				if k > 0 {
					step += float64(all[r][i*n+k] - all[r][i*n+k-1])
				}
			}
			line += fmt.Sprintf("  rank %d: %+8.2f us after rank 0, %7.2f us since the last point", r, late/count/1e3, step/count/1e3)
		}
		fmt.Fprintln(w, line)
	}
}
