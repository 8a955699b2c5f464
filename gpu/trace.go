package gpu

import (
	"fmt"
	"os"

	"github.com/epbench/epbench/kernels"
)

// TraceEnv turns on the kernels' phase stamps (a development aid): each
// block records the globaltimer at its phase boundaries, and the last call
// of each kernel is summarised on stderr when the backend closes.
const TraceEnv = "EPBENCH_TRACE"

func (b *Backend) traceSlot() int { return int(b.plan.TraceBytes()) }

// traceAt is the stamps of call number `call` (0 when tracing is off).
func (b *Backend) traceAt(base, call uint64) uint64 {
	if base == 0 {
		return 0
	}
	return base + call%kernels.TraceCalls*uint64(b.traceSlot())
}

// printTrace summarises the last call of each kernel per phase, then tells
// per phase whether the same blocks are late in every kept call, then prints
// when each of the last calls started and ended (globaltimer ns). Durations
// can be read from them; skew between ranks cannot: the GPUs' globaltimer
// clocks were measured ~8 us apart on one node (docs/PERF.md).
func (b *Backend) printTrace() {
	if b.mem.traceD == 0 {
		return
	}
	size := kernels.TraceCalls * b.traceSlot()
	for op, k := range []struct {
		name   string
		ptr    uint64
		calls  uint64
		phases []string
	}{{"dispatch", b.mem.traceD, b.callsD, kernels.DispatchPhases}, {"combine", b.mem.traceC, b.callsC, kernels.CombinePhases}} {
		if k.calls == 0 {
			continue
		}
		raw := make([]byte, size)
		if err := CopyFromDevice(raw, k.ptr); err != nil {
			fmt.Fprintf(os.Stderr, "epbench: trace: %v\n", err)
			return
		}
		slot := func(call uint64) []byte {
			o := int(call%kernels.TraceCalls) * b.traceSlot()
			return raw[o : o+b.traceSlot()]
		}
		// A call's grid may be smaller than the slot's: the blocks past it
		// hold an earlier call's stamps.
		grid := func(call uint64) int { return b.traceGrids[op][call%kernels.TraceCalls] }
		kernels.TraceSummary(os.Stderr, b.shape.Rank, k.name, k.phases, slot(k.calls-1), grid(k.calls-1))
		// The kept calls of the last call's grid, for whether the same
		// blocks are late call after call.
		first := k.calls - min(k.calls, kernels.TraceCalls)
		var same [][]byte
		for c := first; c < k.calls; c++ {
			if grid(c) == grid(k.calls-1) {
				same = append(same, slot(c))
			}
		}
		kernels.TraceBlocks(os.Stderr, b.shape.Rank, k.name, k.phases, same, grid(k.calls-1))
		for c := first; c < k.calls; c++ {
			start, end := kernels.TraceSpan(slot(c), grid(c))
			fmt.Fprintf(os.Stderr, "epbench: trace rank %d %s call %d start %d end %d\n", b.shape.Rank, k.name, c, start, end)
		}
	}
}
