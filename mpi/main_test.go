package mpi_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/epbench/epbench/internal/mpitest"
	"github.com/epbench/epbench/mpi"
)

func TestMain(m *testing.M) {
	os.Exit(mpitest.Main(m, mpitest.Options{
		Name: "mpi",
		// The smallest job and one that needs oversubscription on small
		// machines.
		Sizes:    []int{2, 4},
		Init:     mpi.Init,
		Finalize: checkShutdown,
	}))
}

// underMPI is true in a rank started by mpirun.
var underMPI = mpitest.InJob()

// checkShutdown finalizes MPI and checks what the package promises after
// Finalize. Finalize also fails if a test left a request in flight.
func checkShutdown() error {
	if err := mpi.Finalize(); err != nil {
		return fmt.Errorf("Finalize: %w", err)
	}
	if !mpi.Finalized() {
		return errors.New("Finalized() is false after Finalize")
	}
	if err := mpi.Barrier(); !errors.Is(err, mpi.ErrFinalized) {
		return fmt.Errorf("Barrier after Finalize returned %v, want ErrFinalized", err)
	}
	if err := mpi.Init(); !errors.Is(err, mpi.ErrFinalized) {
		return fmt.Errorf("Init after Finalize returned %v, want ErrFinalized", err)
	}
	if r := mpi.World().Rank(); r != -1 {
		return fmt.Errorf("World().Rank() after Finalize = %d, want -1", r)
	}
	return nil
}

func requireMPI(t *testing.T)                { t.Helper(); mpitest.Require(t) }
func onMain(f func())                        { mpitest.Do(f) }
func rankSize(t *testing.T) (rank, size int) { t.Helper(); return mpitest.RankSize(t) }

// mpiError returns the *mpi.Error in err, failing the test if there is none.
func mpiError(t *testing.T, err error) *mpi.Error {
	t.Helper()
	var e *mpi.Error
	if !errors.As(err, &e) {
		t.Errorf("error %v is not an *mpi.Error", err)
		return nil
	}
	if e.Msg == "" {
		t.Errorf("error %v has an empty message", err)
	}
	return e
}
