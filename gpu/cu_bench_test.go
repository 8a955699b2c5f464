package gpu

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/kernels"
	"gorgonia.org/cu"
)

// The host cost of the calls of the timed loop, through gorgonia.org/cu and
// through this package's own wrappers, on empty kernels: where gorgonia/cu
// costs nothing measurable and has the call, the backend uses it
// (docs/DESIGN.md, "gorgonia/cu and our wrappers"; docs/PERF.md has the
// measurement that moved the streams and events).
//
//	mpirun -np 1 bin/gpu.test -test.run '^$' -test.bench . -test.benchtime 20000x

// emptyPTX has an empty kernel with one by-value block of the LL kernels'
// argument size (kernels.ArgsSize), one with a single pointer argument, and
// two with the argument block whose names the kernel timer counts as a
// dispatch and a combine (floor_test.go).
var emptyPTX = fmt.Sprintf(`.version 9.0
.target sm_90
.address_size 64
.visible .entry ep_empty_block(.param .align 8 .b8 p[%[1]d]) { ret; }
.visible .entry ep_empty_ptr(.param .u64 ep_empty_ptr_param_0) { ret; }
.visible .entry epbench_empty_dispatch(.param .align 8 .b8 p[%[1]d]) { ret; }
.visible .entry epbench_empty_combine(.param .align 8 .b8 p[%[1]d]) { ret; }
`, kernels.ArgsSize)

// timed runs op b.N times on the main thread with the GPU, and fails
// with its first error.
func timed(b *testing.B, setup func() (op func() error, done func(), err error)) {
	onGPU(b, func(*bench.World, *Device) error {
		op, done, err := setup()
		if err != nil {
			return err
		}
		defer done()
		b.ResetTimer()
		for range b.N {
			if err := op(); err != nil {
				return err
			}
		}
		b.StopTimer()
		return nil
	})
}

// ours: a launch of the empty kernel on the LL grid with the LL kernels'
// argument block, then a stream sync.
func BenchmarkLaunchSyncOurs(b *testing.B) {
	timed(b, func() (func() error, func(), error) {
		m, f, s, params, err := emptyOurs()
		if err != nil {
			return nil, nil, err
		}
		return func() error {
				if err := f.Launch(132, 512, 0, s, params); err != nil {
					return err
				}
				return s.Sync()
			}, func() {
				params.Free()
				s.Destroy()
				m.Unload()
			}, nil
	})
}

// gorgonia/cu: its Launch passes each parameter as 8 bytes (it cannot pass
// the LL kernels' by-value block) from two C allocations per launch, so it
// launches the one-pointer kernel.
func BenchmarkLaunchSyncGorgonia(b *testing.B) {
	timed(b, func() (func() error, func(), error) {
		m, err := cu.LoadData(emptyPTX)
		if err != nil {
			return nil, nil, err
		}
		f, err := m.Function("ep_empty_ptr")
		if err != nil {
			return nil, nil, err
		}
		s, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			return nil, nil, err
		}
		var p uint64
		args := []unsafe.Pointer{unsafe.Pointer(&p)}
		return func() error {
				if err := f.Launch(132, 1, 1, 512, 1, 1, 0, s, args); err != nil {
					return err
				}
				return s.Synchronize()
			}, func() {
				s.Destroy()
				m.Unload()
			}, nil
	})
}

// The timed loop's event pair around an empty kernel, as the backend makes
// it (gorgonia/cu's events and stream, our launch): record, launch,
// record, sync, elapsed.
func BenchmarkEventPair(b *testing.B) {
	timed(b, func() (func() error, func(), error) {
		m, f, s, params, err := emptyOurs()
		if err != nil {
			return nil, nil, err
		}
		e0, err0 := NewEvent()
		e1, err1 := NewEvent()
		if err := errors.Join(err0, err1); err != nil {
			return nil, nil, err
		}
		return func() error {
				if err := errors.Join(e0.Record(s), f.Launch(1, 32, 0, s, params), e1.Record(s), s.Sync()); err != nil {
					return err
				}
				_, err := ElapsedUs(e0, e1)
				return err
			}, func() {
				e0.Destroy()
				e1.Destroy()
				params.Free()
				s.Destroy()
				m.Unload()
			}, nil
	})
}

// emptyOurs loads the empty kernels with this package's wrappers.
func emptyOurs() (Module, Function, Stream, *ParamBlock, error) {
	m, err := LoadModule([]byte(emptyPTX))
	if err != nil {
		return 0, 0, Stream{}, nil, err
	}
	f, err := m.Function("ep_empty_block")
	if err != nil {
		return 0, 0, Stream{}, nil, errors.Join(err, m.Unload())
	}
	s, err := NewStream()
	if err != nil {
		return 0, 0, Stream{}, nil, errors.Join(err, m.Unload())
	}
	return m, f, s, NewParamBlock(kernels.ArgsSize), nil
}
