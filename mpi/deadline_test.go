package mpi_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/epbench/epbench/mpi"
)

// exchangePattern is the byte i of what rank src sends rank dst.
func exchangePattern(src, dst, i int) byte { return byte(src*31 + dst*17 + i) }

// exchangeBuffers lays out an Alltoallv where rank src sends rank dst
// (src+dst)%3*700 bytes: empty, eager and larger messages in one call.
func exchangeBuffers(rank, size int) (send []byte, sc, sd []int, recv []byte, rc, rd []int) {
	sc, sd, rc, rd = make([]int, size), make([]int, size), make([]int, size), make([]int, size)
	ns, nr := 0, 0
	for q := range size {
		sc[q], sd[q] = (rank+q)%3*700, ns
		rc[q], rd[q] = (q+rank)%3*700, nr
		ns += sc[q]
		nr += rc[q]
	}
	send, recv = make([]byte, ns), make([]byte, nr)
	for q := range size {
		for i := range sc[q] {
			send[sd[q]+i] = exchangePattern(rank, q, i)
		}
	}
	return
}

func checkReceived(t *testing.T, rank int, recv []byte, rc, rd []int) {
	t.Helper()
	for s := range rc {
		for i := range rc[s] {
			if got, want := recv[rd[s]+i], exchangePattern(s, rank, i); got != want {
				t.Fatalf("byte %d from rank %d is %#x, want %#x", i, s, got, want)
			}
		}
	}
}

func TestExchangeDeliversWithoutAllocating(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	send, sc, sd, recv, rc, rd := exchangeBuffers(rank, size)
	var x *mpi.Exchange
	var missing []int
	var err error
	var allocs float64
	onMain(func() {
		if x, err = mpi.World().NewExchange(); err != nil {
			return
		}
		if missing, err = x.Alltoallv(send, sc, sd, recv, rc, rd, 11, time.Now().Add(20*time.Second)); err != nil {
			return
		}
		allocs = testing.AllocsPerRun(20, func() {
			if _, e := x.Alltoallv(send, sc, sd, recv, rc, rd, 11, time.Now().Add(20*time.Second)); e != nil {
				err = e
			}
		})
	})
	if err != nil || missing != nil {
		t.Fatalf("Alltoallv: missing %v, %v", missing, err)
	}
	checkReceived(t, rank, recv, rc, rd)
	if allocs != 0 {
		t.Errorf("%v allocations per exchange, want 0", allocs)
	}
}

func TestExchangeRejectsBadLayout(t *testing.T) {
	requireMPI(t)
	_, size := rankSize(t)
	var x *mpi.Exchange
	var err error
	onMain(func() { x, err = mpi.World().NewExchange() })
	if err != nil {
		t.Fatal(err)
	}
	counts, displs := make([]int, size), make([]int, size)
	counts[size-1] = 5
	onMain(func() {
		_, err = x.Alltoallv(make([]byte, 4), counts, displs, nil, make([]int, size), displs, 1, time.Now())
	})
	if err == nil {
		t.Error("a send block beyond the buffer was accepted")
	}
	onMain(func() { _, err = x.Alltoallv(nil, counts[:1], displs, nil, counts, displs, 1, time.Now()) })
	if err == nil && size > 1 {
		t.Error("one count for several ranks was accepted")
	}
}

// TestExchangeNamesLateRank: rank 1 joins lateBy late; the others give up
// after shortWait naming it, cannot start another exchange while that one
// is open, and then wait for it to complete.
func TestExchangeNamesLateRank(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	send, sc, sd, recv, rc, rd := exchangeBuffers(rank, size)
	var x *mpi.Exchange
	var err error
	onMain(func() {
		if x, err = mpi.World().NewExchange(); err == nil {
			err = mpi.Barrier()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if rank == 1 {
		time.Sleep(lateBy)
	}
	var missing, final []int
	var first, again, second error
	onMain(func() {
		deadline := time.Now().Add(shortWait)
		if rank == 1 {
			deadline = time.Now().Add(20 * time.Second)
		}
		missing, first = x.Alltoallv(send, sc, sd, recv, rc, rd, 12, deadline)
		if rank != 1 {
			_, again = x.Alltoallv(send, sc, sd, recv, rc, rd, 12, time.Now().Add(time.Second))
			final, second = x.Wait(time.Now().Add(20 * time.Second))
		}
	})
	if rank == 1 {
		if missing != nil || first != nil {
			t.Fatalf("late rank: missing %v, %v", missing, first)
		}
	} else {
		if !slices.Equal(missing, []int{1}) || !errors.Is(first, mpi.ErrDeadlineExceeded) {
			t.Errorf("missing %v, %v; want [1], ErrDeadlineExceeded", missing, first)
		}
		if !errors.Is(again, mpi.ErrRequestActive) {
			t.Errorf("a second exchange while the first is open: %v, want ErrRequestActive", again)
		}
		if final != nil || second != nil {
			t.Fatalf("waiting on: missing %v, %v", final, second)
		}
	}
	checkReceived(t, rank, recv, rc, rd)
}

func TestStartOnRequestInFlight(t *testing.T) {
	requireMPI(t)
	rank, _ := rankSize(t)
	var r mpi.Request
	buf := make([]byte, 1)
	var first, second, wait error
	onMain(func() {
		// A receive nobody matches until the send below.
		if first = mpi.World().StartIrecv(&r, buf, rank, 21); first != nil {
			return
		}
		second = mpi.World().StartIrecv(&r, buf, rank, 21)
		var s mpi.Request
		if wait = mpi.World().StartIsend(&s, []byte{7}, rank, 21); wait != nil {
			return
		}
		_, wait = (&mpi.Poller{}).Wait([]*mpi.Request{&r, &s}, time.Now().Add(20*time.Second))
	})
	if first != nil || wait != nil {
		t.Fatalf("StartIrecv: %v; wait: %v", first, wait)
	}
	if !errors.Is(second, mpi.ErrRequestActive) {
		t.Errorf("reusing a request in flight: %v, want ErrRequestActive", second)
	}
	if buf[0] != 7 {
		t.Errorf("received %d, want 7", buf[0])
	}
}
