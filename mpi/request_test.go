package mpi_test

import (
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/epbench/epbench/mpi"
)

func ringPattern(src, tag, i int) byte { return byte(src*7 + tag*13 + i) }

func TestIsendIrecvRing(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	next, prev := (rank+1)%size, (rank+size-1)%size
	// Zero bytes, an eager-sized message and one large enough for the
	// rendezvous protocol, where MPI touches the buffers long after Isend.
	sizes := map[int]int{1: 0, 2: 64, 3: 1 << 20}
	tags := []int{1, 2, 3}
	var reqs []*mpi.Request
	recvs := map[int][]byte{}
	var errs []error
	onMain(func() {
		for _, tag := range tags {
			recvs[tag] = make([]byte, sizes[tag])
			r, err := mpi.Irecv(recvs[tag], prev, tag)
			errs = append(errs, err)
			reqs = append(reqs, r)
		}
		for _, tag := range tags {
			buf := make([]byte, sizes[tag])
			for i := range buf {
				buf[i] = ringPattern(rank, tag, i)
			}
			r, err := mpi.Isend(buf, next, tag)
			errs = append(errs, err)
			reqs = append(reqs, r)
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("posting: %v", err)
	}
	// The send buffers are unreachable from here on; pinning must keep them.
	runtime.GC()
	var pending []int
	var err error
	onMain(func() { pending, err = mpi.WaitDeadline(reqs, time.Now().Add(20*time.Second)) })
	if err != nil || pending != nil {
		t.Fatalf("WaitDeadline: pending %v, %v", pending, err)
	}
	for _, tag := range tags {
		for i, b := range recvs[tag] {
			if b != ringPattern(prev, tag, i) {
				t.Fatalf("tag %d: byte %d from rank %d is %#x, want %#x", tag, i, prev, b, ringPattern(prev, tag, i))
			}
		}
	}
	for i, r := range reqs {
		var done bool
		onMain(func() { done, err = r.Test() })
		if !done || err != nil {
			t.Errorf("request %d after completion: Test() = %v, %v", i, done, err)
		}
		onMain(func() { err = r.Wait() })
		if err != nil {
			t.Errorf("request %d after completion: Wait() = %v", i, err)
		}
	}
}

func TestIbarrierTestUntilDone(t *testing.T) {
	requireMPI(t)
	var r *mpi.Request
	var err error
	onMain(func() { r, err = mpi.Ibarrier() })
	if err != nil {
		t.Fatalf("Ibarrier: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	done := false
	for !done && time.Now().Before(deadline) {
		onMain(func() { done, err = r.Test() })
		if err != nil {
			t.Fatalf("Test: %v", err)
		}
	}
	if !done {
		t.Fatal("Ibarrier did not complete within 20s")
	}
	var pending []int
	onMain(func() { pending, err = mpi.WaitDeadline([]*mpi.Request{r, nil}, time.Now()) })
	if pending != nil || err != nil {
		t.Errorf("WaitDeadline on completed and nil requests: %v, %v", pending, err)
	}
}

// lateBy is how long rank 1 waits before joining; the others give up after
// shortWait, then wait for it.
const (
	lateBy    = 300 * time.Millisecond
	shortWait = 50 * time.Millisecond
)

func TestWaitDeadlineReportsLateIbarrier(t *testing.T) {
	requireMPI(t)
	rank, _ := rankSize(t)
	var err error
	onMain(func() { err = mpi.Barrier() })
	if err != nil {
		t.Fatalf("Barrier: %v", err)
	}
	if rank == 1 {
		time.Sleep(lateBy)
	}
	start := time.Now()
	var r *mpi.Request
	var pending []int
	var waitErr error
	onMain(func() {
		if r, err = mpi.Ibarrier(); err != nil {
			return
		}
		if rank != 1 {
			pending, waitErr = mpi.WaitDeadline([]*mpi.Request{r}, time.Now().Add(shortWait))
		}
		err = r.Wait()
	})
	if err != nil {
		t.Fatalf("Ibarrier: %v", err)
	}
	if rank == 1 {
		return
	}
	if !slices.Equal(pending, []int{0}) || !errors.Is(waitErr, mpi.ErrDeadlineExceeded) {
		t.Errorf("WaitDeadline(%v) while rank 1 is late: pending %v, %v; want [0], ErrDeadlineExceeded", shortWait, pending, waitErr)
	}
	if took := time.Since(start); took < lateBy-100*time.Millisecond {
		t.Errorf("Ibarrier completed after %v although rank 1 joined %v late", took, lateBy)
	}
}

func TestWaitDeadlineNamesMissingSender(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	const tag = 7
	var err error
	onMain(func() { err = mpi.Barrier() })
	if err != nil {
		t.Fatalf("Barrier: %v", err)
	}
	if rank == 0 {
		// One receive per peer; only rank 1 (request 0) is late.
		bufs := make([][]byte, size)
		var reqs []*mpi.Request
		var errs []error
		var pending, final []int
		var first, second error
		onMain(func() {
			for src := 1; src < size; src++ {
				bufs[src] = make([]byte, 8)
				r, err := mpi.Irecv(bufs[src], src, tag)
				errs = append(errs, err)
				reqs = append(reqs, r)
			}
			pending, first = mpi.WaitDeadline(reqs, time.Now().Add(shortWait))
			final, second = mpi.WaitDeadline(reqs, time.Now().Add(20*time.Second))
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("Irecv: %v", err)
		}
		if !slices.Equal(pending, []int{0}) || !errors.Is(first, mpi.ErrDeadlineExceeded) {
			t.Errorf("first wait: pending %v, %v; want [0] (rank 1), ErrDeadlineExceeded", pending, first)
		}
		if final != nil || second != nil {
			t.Errorf("second wait: pending %v, %v; want all complete", final, second)
		}
		for src := 1; src < size; src++ {
			if bufs[src][0] != byte(src) {
				t.Errorf("message from rank %d starts with %d", src, bufs[src][0])
			}
		}
		return
	}
	if rank == 1 {
		time.Sleep(lateBy)
	}
	msg := make([]byte, 8)
	msg[0] = byte(rank)
	onMain(func() {
		var r *mpi.Request
		if r, err = mpi.Isend(msg, 0, tag); err == nil {
			err = r.Wait()
		}
	})
	if err != nil {
		t.Errorf("Isend to rank 0: %v", err)
	}
}

func TestPointToPointInvalidPeerReturnsError(t *testing.T) {
	requireMPI(t)
	_, size := rankSize(t)
	buf := make([]byte, 16)
	cases := []struct {
		name  string
		call  func() (*mpi.Request, error)
		class int
	}{
		{"Isend to rank Size", func() (*mpi.Request, error) { return mpi.Isend(buf, size, 0) }, mpi.ClassRank},
		{"Irecv from rank -5", func() (*mpi.Request, error) { return mpi.Irecv(buf, -5, 0) }, mpi.ClassRank},
		{"Isend with tag -3", func() (*mpi.Request, error) { return mpi.Isend(buf, 0, -3) }, mpi.ClassTag},
	}
	for _, c := range cases {
		var r *mpi.Request
		var err error
		onMain(func() { r, err = c.call() })
		if r != nil {
			t.Errorf("%s: got a request", c.name)
		}
		if e := mpiError(t, err); e != nil && e.Class != c.class {
			t.Errorf("%s: class %d (%v), want %d", c.name, e.Class, err, c.class)
		}
	}
}
