package gpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/internal/mpitest"
	"github.com/epbench/epbench/mpi"
)

// The GPU tests run in MPI jobs (bin/gpu.test re-launches itself under
// mpirun), every CUDA and MPI call on the main thread: at one rank by
// default, at the sizes EPBENCH_GPU_TEST_RANKS lists (e.g. "1,2") where the
// node has the GPUs, or shares one under MPS.
func TestMain(m *testing.M) {
	sizes := []int{1}
	if v := os.Getenv("EPBENCH_GPU_TEST_RANKS"); v != "" {
		sizes = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				fmt.Fprintln(os.Stderr, "EPBENCH_GPU_TEST_RANKS: want rank counts such as 1,2")
				os.Exit(2)
			}
			sizes = append(sizes, n)
		}
	}
	os.Exit(mpitest.Main(m, mpitest.Options{Name: "gpu", Sizes: sizes, Init: mpi.Init, Finalize: mpi.Finalize}))
}

// onGPU runs f on the main thread with this rank's world and device (the
// CUDA context is current there) and fails the test with f's error. f must
// not call t.Fatal or t.Skip: they would end the main goroutine.
func onGPU(t testing.TB, f func(w *bench.World, d *Device) error) {
	t.Helper()
	mpitest.Require(t)
	var err error
	skip := ""
	mpitest.Do(func() {
		w, werr := testWorld()
		if werr != nil {
			err = werr
			return
		}
		defer w.Local.Free()
		d, derr := Open(w.LocalRank)
		if derr != nil {
			skip = derr.Error()
			return
		}
		defer d.Close()
		err = f(w, d)
	})
	if skip != "" {
		t.Skipf("no usable GPU: %s", skip)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// testWorld describes this rank of the test's MPI job.
func testWorld() (*bench.World, error) {
	w := &bench.World{Comm: mpi.World()}
	w.Rank, w.Size = w.Comm.Rank(), w.Comm.Size()
	local, err := w.Comm.SplitShared()
	if err != nil {
		return nil, err
	}
	w.Local, w.LocalRank, w.LocalSize = local, local.Rank(), local.Size()
	if w.Host, err = mpi.ProcessorName(); err != nil {
		local.Free()
		return nil, err
	}
	return w, nil
}

// testConfig is ep_bench's defaults, the kernels loaded from
// $EPBENCH_PTX_DIR where it is set (PTX fresh from the sources, before it
// is committed).
func testConfig() *config.Config {
	c := config.Default()
	c.PTXDir = os.Getenv("EPBENCH_PTX_DIR")
	return c
}
