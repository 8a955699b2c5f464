package mpi_test

import (
	"errors"
	"testing"
	"time"

	"github.com/epbench/epbench/mpi"
)

func TestCallsBeforeInit(t *testing.T) {
	if underMPI {
		t.Skip("MPI is initialized in a rank; the launching process checks calls made before Init")
	}
	if mpi.Initialized() || mpi.Finalized() {
		t.Fatalf("Initialized()=%v Finalized()=%v before Init, want false, false", mpi.Initialized(), mpi.Finalized())
	}
	w := mpi.World()
	if w.Rank() != -1 || w.Size() != 0 {
		t.Errorf("World() before Init: rank %d size %d, want -1, 0", w.Rank(), w.Size())
	}
	if got := mpi.Wtime(); got != 0 {
		t.Errorf("Wtime() before Init = %v, want 0", got)
	}
	buf := make([]byte, 8)
	calls := map[string]func() error{
		"Finalize": mpi.Finalize,
		"Barrier":  mpi.Barrier,
		"Bcast":    func() error { return mpi.Bcast(buf, 0) },
		"AllgatherBytes": func() error {
			_, err := mpi.AllgatherBytes(buf)
			return err
		},
		"AllgatherInt32": func() error {
			_, err := mpi.AllgatherInt32([]int32{1})
			return err
		},
		"AllgatherInt64": func() error {
			_, err := mpi.AllgatherInt64([]int64{1})
			return err
		},
		"AllgatherFloat64": func() error {
			_, err := mpi.AllgatherFloat64([]float64{1})
			return err
		},
		"Alltoallv": func() error {
			return mpi.Alltoallv(buf, []int{8}, []int{0}, buf, []int{8}, []int{0})
		},
		"AllreduceFloat64": func() error {
			_, err := mpi.AllreduceFloat64([]float64{1}, mpi.Sum)
			return err
		},
		"AllreduceInt64": func() error {
			_, err := mpi.AllreduceInt64([]int64{1}, mpi.Min)
			return err
		},
		"AllreduceInt32": func() error {
			_, err := mpi.AllreduceInt32([]int32{1}, mpi.Max)
			return err
		},
		"AllreduceMinLoc": func() error {
			_, err := mpi.AllreduceMinLoc([]mpi.ValueRank{{Value: 1}})
			return err
		},
		"AllreduceMaxLoc": func() error {
			_, err := mpi.AllreduceMaxLoc([]mpi.ValueRank{{Value: 1}})
			return err
		},
		"Isend": func() error {
			_, err := mpi.Isend(buf, 0, 0)
			return err
		},
		"Irecv": func() error {
			_, err := mpi.Irecv(buf, 0, 0)
			return err
		},
		"Ibarrier": func() error {
			_, err := mpi.Ibarrier()
			return err
		},
		"WaitDeadline": func() error {
			_, err := mpi.WaitDeadline(nil, time.Now())
			return err
		},
		"SplitShared": func() error {
			_, err := w.SplitShared()
			return err
		},
		"Free": w.Free,
		"ProcessorName": func() error {
			_, err := mpi.ProcessorName()
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, mpi.ErrNotInitialized) {
			t.Errorf("%s before Init returned %v, want ErrNotInitialized", name, err)
		}
	}
	if mpi.Initialized() {
		t.Error("a call before Init initialized MPI")
	}
}

func TestNilRequestIsComplete(t *testing.T) {
	var r *mpi.Request
	if done, err := r.Test(); !done || err != nil {
		t.Errorf("nil Request Test() = %v, %v; want true, nil", done, err)
	}
	if err := r.Wait(); err != nil {
		t.Errorf("nil Request Wait() = %v", err)
	}
}

func TestErrorText(t *testing.T) {
	e := &mpi.Error{Code: 8, Class: 8, Msg: "MPI_ERR_ROOT: invalid root"}
	want := "MPI_ERR_ROOT: invalid root (MPI error class 8, code 8)"
	if got := e.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[mpi.Op]string{mpi.Sum: "Sum", mpi.Min: "Min", mpi.Max: "Max", mpi.Op(0): "Op(0)"} {
		if got := op.String(); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", int(op), got, want)
		}
	}
}
