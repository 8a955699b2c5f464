package report

import "fmt"

// TimerSlack is how far a rank's CUPTI kernel average may exceed its
// event-timed average of the same operation before KernelTimerDoubts names
// it: the kernel timer covers the first timed pair, which the event times
// drop, and the two clocks round differently.
const TimerSlack = 0.5 // µs

// KernelTimerDoubts names the ranks and operations whose CUPTI kernel
// average exceeds the average time between the CUDA events recorded around
// the same kernels. The events bracket the kernel in stream order, so its
// run cannot be longer than that interval: a CUPTI record that is longer
// includes time outside the kernel's run on that GPU (docs/PERF.md, "Fast
// and slow runs"). Ranks without kernel times are skipped.
func KernelTimerDoubts(per []RankValues) []string {
	var out []string
	for _, rv := range per {
		for _, op := range []struct {
			name   string
			kernel *float64
			events RankPhase
		}{{"dispatch", rv.KernelDispatchUS, rv.Dispatch}, {"combine", rv.KernelCombineUS, rv.Combine}} {
			if op.kernel == nil || op.events.Samples == 0 || *op.kernel <= op.events.AvgUS+TimerSlack {
				continue
			}
			out = append(out, fmt.Sprintf("rank %d %s: CUPTI kernel average %.2f us exceeds the %.2f us between the CUDA events around the kernel; that rank's kernel records include time outside the kernel's run (docs/PERF.md, \"Fast and slow runs\")",
				rv.Rank, op.name, *op.kernel, op.events.AvgUS))
		}
	}
	return out
}
