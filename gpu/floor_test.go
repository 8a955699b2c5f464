package gpu

import (
	"errors"
	"testing"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/cupti"
	"github.com/epbench/epbench/kernels"
)

// The floor under every kernel's time as the kernel timer reports it: an
// empty kernel on the LL kernels' grid (one 512-thread block per SM),
// launched as they are, dispatch and combine in turn, timed by the same
// in-process CUPTI collector (docs/PERF.md, the local path's floors).
//
//	mpirun -np 1 bin/gpu.test -test.run '^$' -test.bench EmptyKernelCUPTI -test.benchtime 2000x
func BenchmarkEmptyKernelCUPTI(b *testing.B) {
	var dUs, cUs float64
	onGPU(b, func(_ *bench.World, dev *Device) error {
		m, err := LoadModule([]byte(emptyPTX))
		if err != nil {
			return err
		}
		defer m.Unload()
		d, err := m.Function("epbench_empty_dispatch")
		if err != nil {
			return err
		}
		c, err := m.Function("epbench_empty_combine")
		if err != nil {
			return err
		}
		s, err := NewStream()
		if err != nil {
			return err
		}
		defer s.Destroy()
		params := NewParamBlock(kernels.ArgsSize)
		defer params.Free()
		col, err := cupti.Open()
		if err != nil {
			return err
		}
		defer col.Close()
		grid := dev.Info.SMs
		pair := func() error {
			return errors.Join(d.Launch(grid, 512, 0, s, params), s.Sync(), c.Launch(grid, 512, 0, s, params), s.Sync())
		}
		for range 10 { // warm-up
			if err := pair(); err != nil {
				return err
			}
		}
		if err := col.Start(); err != nil {
			return err
		}
		b.ResetTimer()
		for range b.N {
			if err := pair(); err != nil {
				return err
			}
		}
		b.StopTimer()
		dUs, cUs, err = col.Stop(b.N, b.N)
		return err
	})
	b.ReportMetric(dUs, "dispatch-us")
	b.ReportMetric(cUs, "combine-us")
}
