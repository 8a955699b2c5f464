package bench

import (
	"fmt"
	"slices"
)

// TimerSlack is how far a rank's CUPTI kernel average may exceed its
// event-timed average of the same operation, or be raised by the first
// timed pair, before KernelTimerDoubts says so (µs).
const TimerSlack = 0.5

// KernelTimerDoubts names what makes this rank's kernel averages doubtful,
// per operation:
//   - a CUPTI kernel average above the average time between the CUDA events
//     recorded around the same kernels over the same pairs: the events
//     bracket each kernel in stream order, so no kernel run can be longer,
//     and the kernel timer counted time outside the kernels' runs;
//   - a first timed pair whose events lie so far above the others' median
//     that it alone raises the average of all pairs, which the kernel
//     average covers (as ep_bench's does), by more than TimerSlack: the host
//     statistics drop that pair, the kernel average keeps it.
//
// Empty without kernel times.
func (m *Measurement) KernelTimerDoubts(rank int) []string {
	if !m.KernelOK {
		return nil
	}
	var out []string
	for _, op := range []struct {
		name   string
		kernel float64
		events []float64
	}{{"dispatch", m.KernelDispatchUs, m.DispatchUs}, {"combine", m.KernelCombineUs, m.CombineUs}} {
		n := len(op.events)
		if n == 0 {
			continue
		}
		sum := 0.0
		for _, v := range op.events {
			sum += v
		}
		if avg := sum / float64(n); op.kernel > avg+TimerSlack {
			out = append(out, fmt.Sprintf("rank %d %s: CUPTI kernel average %.2f us exceeds the %.2f us between the CUDA events around the same kernels; the kernel timer counted time outside the kernels' runs",
				rank, op.name, op.kernel, avg))
		}
		if n < 2 {
			continue
		}
		rest := slices.Clone(op.events[1:])
		slices.Sort(rest)
		med := rest[len(rest)/2]
		if len(rest)%2 == 0 {
			med = (rest[len(rest)/2-1] + med) / 2
		}
		if lift := (op.events[0] - med) / float64(n); lift > TimerSlack {
			out = append(out, fmt.Sprintf("rank %d %s: the first timed pair took %.2f us between its events (median of the others %.2f us); it raises this rank's kernel average over %d pairs by up to %.2f us",
				rank, op.name, op.events[0], med, n, lift))
		}
	}
	return out
}
