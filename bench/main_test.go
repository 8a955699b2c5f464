package bench

import (
	"os"
	"testing"

	"github.com/epbench/epbench/internal/mpitest"
	"github.com/epbench/epbench/mpi"
)

func TestMain(m *testing.M) {
	os.Exit(mpitest.Main(m, mpitest.Options{
		Name:     "bench",
		Sizes:    []int{2, 4},
		Init:     mpi.Init,
		Finalize: mpi.Finalize,
	}))
}

func needMPI(t *testing.T) { t.Helper(); mpitest.Require(t) }
func onMPI(f func())       { mpitest.Do(f) }
