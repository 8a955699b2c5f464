package gpu

import (
	"errors"
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/ll"
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
	onGPU(t, func(w *bench.World, dev *Device) error { return noLeak(t, w, dev) })
}

// noLeak runs the cycles on every rank of the job with real peers: IPC
// handles are exported, opened and closed each cycle.
func noLeak(t *testing.T, w *bench.World, dev *Device) error {
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
		tr, err := NewIPC(g, size, local)
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
	for i := 0; i < 100; i++ {
		if err := cycle(i, i%10 == 9); err != nil {
			return err
		}
	}
	after, err := usedMiB(dev.Info.PCIBusID)
	if err != nil {
		return err
	}
	t.Logf("rank %d of %d: GPU used memory: %.0f MiB before the 100 cycles, %.0f MiB after", g.Rank(), size, before, after)
	if after-before > 2 {
		return fmt.Errorf("used memory grew by %.0f MiB over 100 set-up/tear-down cycles", after-before)
	}
	return nil
}
