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

func (b *Backend) printTrace() {
	if b.traceD == 0 {
		return
	}
	size := b.grid * kernels.TracePoints * 8
	for _, k := range []struct {
		name   string
		ptr    uint64
		phases []string
	}{{"dispatch", b.traceD, kernels.DispatchPhases}, {"combine", b.traceC, kernels.CombinePhases}} {
		raw := make([]byte, size)
		if err := CopyFromDevice(raw, k.ptr); err != nil {
			fmt.Fprintf(os.Stderr, "epbench: trace: %v\n", err)
			return
		}
		kernels.TraceSummary(os.Stderr, b.shape.Rank, k.name, k.phases, raw, b.grid)
	}
}
