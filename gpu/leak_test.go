package gpu

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/mpi"
)

// oneRank is the gatherer of a job of one rank.
type oneRank struct{}

func (oneRank) Rank() int { return 0 }
func (oneRank) Size() int { return 1 }
func (oneRank) AllgatherBytes(b []byte) ([]byte, error) {
	return append([]byte(nil), b...), nil
}

// requireGPU locks the test's goroutine to its OS thread (the context is
// current on one thread, as the executables do in main) and opens GPU 0.
func requireGPU(t *testing.T) *Device {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	d, err := Open(0)
	if err != nil {
		t.Skipf("no usable GPU: %v", err)
	}
	return d
}

// usedMiB is the GPU's used memory as NVML sees it (all processes).
func usedMiB(t *testing.T, busID string) float64 {
	t.Helper()
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		t.Fatalf("NVML: %v", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	h, ret := nvml.DeviceGetHandleByPciBusId(busID)
	if ret != nvml.SUCCESS {
		t.Fatalf("NVML handle of %s: %v", busID, nvml.ErrorString(ret))
	}
	m, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		t.Fatalf("NVML memory: %v", nvml.ErrorString(ret))
	}
	return float64(m.Used) / (1 << 20)
}

// TestNoLeakOverSetupTeardownCycles: 100 set-ups and tear-downs in one process
// (module, stream, events, symmetric and local buffers, IPC handles of the
// peers under mpirun, the mapped error word), every tenth failing on purpose
// after its allocations, every third running a dispatch and a combine, leave
// the GPU's used memory where it was.
func TestNoLeakOverSetupTeardownCycles(t *testing.T) {
	dev := requireGPU(t)
	defer dev.Close()

	// Under mpirun the cycles run on every rank with real peers: IPC handles
	// are exported, opened and closed each cycle. Alone, one rank.
	var g Gatherer = oneRank{}
	size, local := 1, 1
	if os.Getenv("OMPI_COMM_WORLD_SIZE") != "" {
		if err := mpi.Init(); err != nil {
			t.Fatal(err)
		}
		defer mpi.Finalize()
		w := mpi.World()
		lc, err := w.SplitShared()
		if err != nil {
			t.Fatal(err)
		}
		defer lc.Free()
		g, size, local = w, w.Size(), lc.Size()
		dev.Close()
		if dev, err = Open(lc.Rank()); err != nil {
			t.Fatal(err)
		}
	}
	shape := ll.Shape{Ranks: size, Rank: g.Rank(), Tokens: 128, Hidden: 7168, TopK: 8, Experts: 256}
	cfg := config.Default()
	cfg.Reroute = 2

	cycle := func(i int, fail bool) {
		injected := errors.New("injected set-up failure")
		if fail {
			afterAlloc = func() error { return injected }
		} else {
			afterAlloc = nil
		}
		defer func() { afterAlloc = nil }()
		tr, err := NewIPC(g, size, local)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewBackend(dev, g, tr, shape, cfg, false)
		if fail {
			if !errors.Is(err, injected) {
				t.Fatalf("cycle %d: set-up error %v, want the injected one", i, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if i%3 == 0 {
			for _, op := range []func(int) error{b.Dispatch, b.Combine} {
				if err := op(i % 2); err != nil {
					t.Fatalf("cycle %d: %v", i, err)
				}
				if err := b.Sync(); err != nil {
					t.Fatalf("cycle %d: %v", i, err)
				}
			}
		}
		if err := b.Close(); err != nil {
			t.Fatalf("cycle %d: close: %v", i, err)
		}
	}
	// One warm cycle first: the driver keeps some memory after the first
	// module load and launch, which is not a leak of ours.
	cycle(-1, false)
	before := usedMiB(t, dev.Info.PCIBusID)
	for i := 0; i < 100; i++ {
		cycle(i, i%10 == 9)
	}
	after := usedMiB(t, dev.Info.PCIBusID)
	t.Logf("rank %d of %d: GPU used memory: %.0f MiB before the 100 cycles, %.0f MiB after", g.Rank(), size, before, after)
	if after-before > 2 {
		t.Fatalf("used memory grew by %.0f MiB over 100 set-up/tear-down cycles", after-before)
	}
}
