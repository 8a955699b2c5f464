package mpi_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/epbench/epbench/mpi"
)

func TestWorldRankAndSize(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	w := mpi.World()
	if w.Rank() != rank || w.Size() != size {
		t.Fatalf("World rank %d size %d, mpirun started rank %d of %d", w.Rank(), w.Size(), rank, size)
	}
	if !mpi.Initialized() || mpi.Finalized() {
		t.Errorf("Initialized()=%v Finalized()=%v in a running job", mpi.Initialized(), mpi.Finalized())
	}
	var err error
	onMain(func() { err = mpi.Init() })
	if !errors.Is(err, mpi.ErrAlreadyInitialized) {
		t.Errorf("second Init returned %v, want ErrAlreadyInitialized", err)
	}
}

func TestSplitSharedGroupsRanksByNode(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	const nameLen = 256
	var (
		names           []byte
		local           *mpi.Comm
		localRank       int
		localSize       int
		localMembers    []int64
		freeErr, again  error
		barrierAfter    error
		freeWorld       error
		worldStillWorks error
	)
	onMain(func() {
		name, err := mpi.ProcessorName()
		if err != nil || name == "" {
			t.Errorf("ProcessorName() = %q, %v", name, err)
		}
		padded := make([]byte, nameLen)
		copy(padded, name)
		if names, err = mpi.AllgatherBytes(padded); err != nil {
			t.Errorf("AllgatherBytes: %v", err)
		}
		if local, err = mpi.World().SplitShared(); err != nil {
			t.Errorf("SplitShared: %v", err)
			return
		}
		localRank, localSize = local.Rank(), local.Size()
		if localMembers, err = local.AllgatherInt64([]int64{int64(rank)}); err != nil {
			t.Errorf("AllgatherInt64 on the node communicator: %v", err)
		}
		freeErr = local.Free()
		again = local.Free()
		barrierAfter = local.Barrier()
		freeWorld = mpi.World().Free()
		worldStillWorks = mpi.Barrier()
	})
	if local == nil || len(names) != size*nameLen {
		t.FailNow()
	}
	mine := names[rank*nameLen : (rank+1)*nameLen]
	var want []int64
	for r := range size {
		if bytes.Equal(names[r*nameLen:(r+1)*nameLen], mine) {
			want = append(want, int64(r))
		}
	}
	if localSize != len(want) || localRank != slices.Index(want, int64(rank)) {
		t.Errorf("node rank %d size %d, want %d of %d (world ranks on this node: %v)",
			localRank, localSize, slices.Index(want, int64(rank)), len(want), want)
	}
	if !slices.Equal(localMembers, want) {
		t.Errorf("node communicator members %v, want %v", localMembers, want)
	}
	if freeErr != nil {
		t.Errorf("Free: %v", freeErr)
	}
	if !errors.Is(again, mpi.ErrCommFreed) || !errors.Is(barrierAfter, mpi.ErrCommFreed) {
		t.Errorf("after Free: Free %v, Barrier %v; want ErrCommFreed", again, barrierAfter)
	}
	if local.Rank() != -1 || local.Size() != 0 {
		t.Errorf("freed communicator reports rank %d size %d, want -1, 0", local.Rank(), local.Size())
	}
	if freeWorld == nil || !strings.Contains(freeWorld.Error(), "world communicator cannot be freed") {
		t.Errorf("World().Free() = %v, want a refusal", freeWorld)
	}
	if worldStillWorks != nil {
		t.Errorf("Barrier after refused World().Free(): %v", worldStillWorks)
	}
}

func TestBarrierWaitsForLateRank(t *testing.T) {
	requireMPI(t)
	rank, _ := rankSize(t)
	const late = 150 * time.Millisecond
	var err error
	onMain(func() { err = mpi.Barrier() })
	if err != nil {
		t.Fatalf("Barrier: %v", err)
	}
	if rank == 0 {
		time.Sleep(late)
	}
	var waited float64
	onMain(func() {
		start := mpi.Wtime()
		err = mpi.Barrier()
		waited = mpi.Wtime() - start
	})
	if err != nil {
		t.Fatalf("Barrier: %v", err)
	}
	// Leaving the first barrier is not simultaneous; allow for that skew.
	if rank != 0 && waited < 0.1 {
		t.Errorf("rank %d left the barrier after %.3fs although rank 0 entered it %v late", rank, waited, late)
	}
}

func TestBcastFromEveryRoot(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	for root := range size {
		buf := make([]byte, 1000)
		for i := range buf {
			if rank == root {
				buf[i] = byte(root*31 + i)
			} else {
				buf[i] = 0xff
			}
		}
		var err, emptyErr error
		onMain(func() {
			err = mpi.Bcast(buf, root)
			emptyErr = mpi.Bcast(nil, root)
		})
		if err != nil || emptyErr != nil {
			t.Fatalf("Bcast from root %d: %v; empty buffer: %v", root, err, emptyErr)
		}
		for i, b := range buf {
			if b != byte(root*31+i) {
				t.Fatalf("root %d: byte %d is %#x, want %#x", root, i, b, byte(root*31+i))
			}
		}
	}
}

func TestBcastInvalidRootReturnsError(t *testing.T) {
	requireMPI(t)
	_, size := rankSize(t)
	for _, root := range []int{size, -7} {
		var err, after error
		onMain(func() {
			err = mpi.Bcast(make([]byte, 4), root)
			after = mpi.Barrier()
		})
		if e := mpiError(t, err); e != nil && e.Class != mpi.ClassRoot {
			t.Errorf("Bcast root %d: class %d (%v), want ClassRoot %d", root, e.Class, err, mpi.ClassRoot)
		}
		if err != nil && !strings.Contains(err.Error(), "MPI_Bcast") {
			t.Errorf("Bcast error %q does not name the call", err)
		}
		if after != nil {
			t.Errorf("Barrier after a failed Bcast: %v", after)
		}
	}
}

func TestWtimeAdvances(t *testing.T) {
	requireMPI(t)
	var t0, t1 float64
	onMain(func() { t0 = mpi.Wtime() })
	time.Sleep(20 * time.Millisecond)
	onMain(func() { t1 = mpi.Wtime() })
	if d := t1 - t0; d < 0.019 || d > 5 {
		t.Errorf("Wtime advanced %.6fs over a 20ms sleep", d)
	}
}
