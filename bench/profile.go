package bench

import (
	"errors"
	"fmt"
)

// Profiler is what -p/--profile needs of a platform: the profiler's capture
// range (cuProfilerStart/Stop, which nsys --capture-range=cudaProfilerApi
// follows) and named NVTX ranges, which cost nothing where no NVTX
// injection library (a profiler) is loaded.
type Profiler struct {
	Start, Stop func() error
	Push        func(name string) error
	Pop         func() error
}

// The NVTX ranges of the profiled loop, named as ep_bench names them.
const (
	RangeHandleCreate = "HandleCreate"
	RangePaired       = "Paired Dispatch+Combine Benchmark"
	RangeDispatch     = "Dispatch"
	RangeCombine      = "Combine"
)

// profile is -p's extra loop after the timed one, as ep_bench runs it:
// inside the profiler's capture range, the set-up of the inputs again in
// HandleCreate (epbench's counterpart of ep_bench's handle: what dispatch
// reads besides the symmetric buffers, uploaded again where the backend can
// re-target its set-up), then Iters pairs in "Paired Dispatch+Combine
// Benchmark", each operation in its own range up to its sync, a barrier
// after each pair. Its times are not kept.
func (r *Run) profile(routings int) (err error) {
	p, b := r.Profiler, r.Backend
	if p == nil {
		return errors.New("-p/--profile: this platform has no profiler ranges")
	}
	if err := r.hostBarrier.Wait("barrier before the profiled loop"); err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer func() {
		if serr := p.Stop(); err == nil {
			err = serr
		}
	}()
	inRange := func(name string, f func() error) error {
		if err := p.Push(name); err != nil {
			return err
		}
		ferr := f()
		return errors.Join(ferr, p.Pop())
	}
	err = inRange(RangeHandleCreate, func() error {
		if rs, ok := b.(Resizer); ok && r.Shape != nil {
			if err := rs.SetShape(*r.Shape); err != nil {
				return err
			}
		}
		return b.Sync()
	})
	if err != nil {
		return fmt.Errorf("profiled set-up: %w", err)
	}
	if err := r.hostBarrier.Wait("barrier after the profiled set-up"); err != nil {
		return err
	}
	return inRange(RangePaired, func() error {
		for i := 0; i < r.Cfg.Iters; i++ {
			j := i % routings
			err := inRange(RangeDispatch, func() error { return errors.Join(r.dispatch(j), b.Sync()) })
			if err == nil {
				err = inRange(RangeCombine, func() error { return errors.Join(r.combine(j), b.Sync()) })
			}
			if err == nil {
				err = r.barrier.Wait("barrier after the pair")
			}
			if err != nil {
				return fmt.Errorf("profiled iteration %d: %w", i, err)
			}
		}
		return nil
	})
}
