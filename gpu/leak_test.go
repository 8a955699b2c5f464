package gpu

import (
	"errors"
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/nccl"
)

// usedMiB is the GPU's used memory as NVML sees it (all processes).
func usedMiB(busID string) (float64, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return 0, fmt.Errorf("NVML: %v", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	h, ret := nvml.DeviceGetHandleByPciBusId(busID)
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("NVML handle of %s: %v", busID, nvml.ErrorString(ret))
	}
	m, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("NVML memory: %v", nvml.ErrorString(ret))
	}
	return float64(m.Used) / (1 << 20), nil
}

// TestNoLeakOverSetupTeardownCycles: 100 set-ups and tear-downs in one process
// (module, stream, events, symmetric and local buffers, IPC handles of the
// peers under mpirun, the mapped error word), every tenth failing on purpose
// after its allocations, every third running a dispatch and a combine, leave
// the GPU's used memory where it was.
func TestNoLeakOverSetupTeardownCycles(t *testing.T) {
	onGPU(t, func(w *bench.World, dev *Device) error {
		return noLeak(t, w, dev, 100, func() (Transport, error) { return NewIPC(w.Comm, w.Size, w.LocalSize) })
	})
}

// TestNoLeakNCCLTransport: the same cycles on the NCCL transport, each with
// its own communicator, memory and window (fewer: a communicator takes a
// fraction of a second to set up). Skipped where no NCCL 2.30+ is found.
func TestNoLeakNCCLTransport(t *testing.T) {
	if err := ncclAvailable(); err != nil {
		t.Skipf("no usable NCCL: %v", err)
	}
	onGPU(t, func(w *bench.World, dev *Device) error {
		return noLeak(t, w, dev, 20, func() (Transport, error) { return nccl.NewTransport(w.Comm, w.LocalSize > 1, bench.HostWorkTimeout) })
	})
}

// ncclAvailable says why no NCCL transport can be opened here, if so.
func ncclAvailable() error {
	lib, err := nccl.Load()
	if err != nil {
		return err
	}
	return lib.Close()
}

// noLeak runs the cycles on every rank of the job with real peers: each
// cycle opens the transport (IPC handles exported, opened and closed; or
// an NCCL communicator and window) and closes it.
func noLeak(t *testing.T, w *bench.World, dev *Device, cycles int, open func() (Transport, error)) error {
	g, size, local := w.Comm, w.Size, w.LocalSize
	shape := ll.Shape{Ranks: size, Rank: g.Rank(), Tokens: 128, Hidden: 7168, TopK: 8, Experts: 256}
	cfg := testConfig()
	cfg.Reroute = 2

	cycle := func(i int, fail bool) error {
		injected := errors.New("injected set-up failure")
		if fail {
			afterAlloc = func() error { return injected }
		} else {
			afterAlloc = nil
		}
		defer func() { afterAlloc = nil }()
		tr, err := open()
		if err != nil {
			return err
		}
		b, err := NewBackend(dev, g, tr, shape, cfg, Sharing{Ranks: local})
		if fail {
			if !errors.Is(err, injected) {
				return fmt.Errorf("cycle %d: set-up error %v, want the injected one", i, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		if i%3 == 0 {
			for _, op := range []func(int) error{b.Dispatch, b.Combine} {
				if err := op(i % 2); err != nil {
					return fmt.Errorf("cycle %d: %w", i, err)
				}
				if err := b.Sync(); err != nil {
					return fmt.Errorf("cycle %d: %w", i, err)
				}
			}
		}
		if err := b.Close(); err != nil {
			return fmt.Errorf("cycle %d: close: %w", i, err)
		}
		return nil
	}
	// One warm cycle first: the driver keeps some memory after the first
	// module load and launch, which is not a leak of ours.
	if err := cycle(-1, false); err != nil {
		return err
	}
	before, err := usedMiB(dev.Info.PCIBusID)
	if err != nil {
		return err
	}
	for i := 0; i < cycles; i++ {
		if err := cycle(i, i%10 == 9); err != nil {
			return err
		}
	}
	after, err := usedMiB(dev.Info.PCIBusID)
	if err != nil {
		return err
	}
	t.Logf("rank %d of %d: GPU used memory: %.0f MiB before the %d cycles, %.0f MiB after", g.Rank(), size, before, cycles, after)
	if after-before > 2 {
		return fmt.Errorf("used memory grew by %.0f MiB over %d set-up/tear-down cycles", after-before, cycles)
	}
	return nil
}
