package mpi_test

import (
	"slices"
	"testing"
	"time"

	"github.com/epbench/epbench/mpi"
)

// An exchange among the active ranks gives up on a rank that does not take
// part: the others get it back as missing with no error, its receive
// cancelled, and their next exchange, with it left out, delivers and
// leaves nothing in flight (Finalize checks). The absent rank then joins a
// later exchange with the rank left out of it too.
func TestExchangeGivesUpOnAnAbsentRank(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	// Four bytes each way: the sends to the absent rank leave eagerly.
	sc, sd, rc, rd := make([]int, size), make([]int, size), make([]int, size), make([]int, size)
	for q := range size {
		sc[q], sd[q], rc[q], rd[q] = 4, 4*q, 4, 4*q
	}
	send, recv := make([]byte, 4*size), make([]byte, 4*size)
	for q := range size {
		send[4*q] = byte(10*rank + q)
	}
	all := slices.Repeat([]bool{true}, size)
	without := slices.Clone(all)
	without[1] = false
	var missing, again []int
	var first, second, bar error
	onMain(func() {
		c := mpi.World()
		if rank != 1 {
			missing, first = c.AlltoallvActive(send, sc, sd, recv, rc, rd, 31, time.Now().Add(300*time.Millisecond), all)
		}
		if bar = mpi.Barrier(); bar != nil {
			return
		}
		mask := without
		if rank == 1 {
			mask = slices.Repeat([]bool{false}, size)
			mask[1] = true // alone
		}
		again, second = c.AlltoallvActive(send, sc, sd, recv, rc, rd, 32, time.Now().Add(20*time.Second), mask)
	})
	if bar != nil {
		t.Fatal(bar)
	}
	if rank != 1 && (!slices.Equal(missing, []int{1}) || first != nil) {
		t.Errorf("rank %d: missing %v, %v; want [1] and no error", rank, missing, first)
	}
	if again != nil || second != nil {
		t.Fatalf("rank %d: the exchange without rank 1: missing %v, %v", rank, again, second)
	}
	for s := range size {
		if rank == 1 || s == 1 {
			continue
		}
		if got, want := recv[4*s], byte(10*s+rank); got != want {
			t.Errorf("rank %d: byte from rank %d is %d, want %d", rank, s, got, want)
		}
	}
}
