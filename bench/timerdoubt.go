package bench

import "fmt"

// TimerSlack is how far a rank's CUPTI kernel average may exceed its
// event-timed average of the same operation before KernelTimerDoubts names
// it (the two clocks round differently).
const TimerSlack = 0.5 // µs

// KernelTimerDoubts names the operations whose CUPTI kernel average on this
// rank exceeds the average time between the CUDA events recorded around the
// same kernels over the same timed pairs. The events bracket each kernel in
// stream order, so no kernel run can be longer than that interval: a longer
// CUPTI average means the kernel timer counted time outside the kernels'
// runs. Empty without kernel times.
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
		if len(op.events) == 0 {
			continue
		}
		sum := 0.0
		for _, v := range op.events {
			sum += v
		}
		if avg := sum / float64(len(op.events)); op.kernel > avg+TimerSlack {
			out = append(out, fmt.Sprintf("rank %d %s: CUPTI kernel average %.2f us exceeds the %.2f us between the CUDA events around the same kernels; the kernel timer counted time outside the kernels' runs",
				rank, op.name, op.kernel, avg))
		}
	}
	return out
}
