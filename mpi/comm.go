package mpi

// #include "epmpi.h"
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Comm is an MPI communicator. Its rank and size are read once when it is
// created, so Rank and Size cost no MPI call.
type Comm struct {
	h     C.MPI_Comm
	rank  int
	size  int
	world bool
	freed bool

	exchange *Exchange // AlltoallvDeadline's requests, made on first use
}

// world is filled in by Init and cleared by Finalize.
var world = &Comm{rank: -1, world: true}

// World returns MPI_COMM_WORLD. Before Init (and after Finalize) its Rank is
// -1, its Size 0, and its operations return ErrNotInitialized (ErrFinalized).
func World() *Comm { return world }

// newComm takes ownership of h: it makes errors come back as values and
// caches rank and size.
func newComm(h C.MPI_Comm) (*Comm, error) {
	c := &Comm{h: h}
	err := check("MPI_Comm_set_errhandler", C.epmpi_errors_return(h))
	var rank, size C.int
	if err == nil {
		err = check("MPI_Comm_rank", C.MPI_Comm_rank(h, &rank))
	}
	if err == nil {
		err = check("MPI_Comm_size", C.MPI_Comm_size(h, &size))
	}
	if err != nil {
		return nil, err
	}
	c.rank, c.size = int(rank), int(size)
	return c, nil
}

// ready reports whether operations on c may be made now.
func (c *Comm) ready() error {
	if err := ready(); err != nil {
		return err
	}
	if c == nil || c.freed {
		return ErrCommFreed
	}
	return nil
}

// Rank returns this process's rank in c, or -1 when c cannot be used.
func (c *Comm) Rank() int {
	if c.ready() != nil {
		return -1
	}
	return c.rank
}

// Size returns the number of processes in c, or 0 when c cannot be used.
func (c *Comm) Size() int {
	if c.ready() != nil {
		return 0
	}
	return c.size
}

// SplitShared returns the communicator of the processes of c that share
// memory with this one, that is, that run on the same node
// (MPI_COMM_TYPE_SHARED). Ranks keep their relative order from c, so its Rank
// and Size are the node-local rank and size. Free it when done.
func (c *Comm) SplitShared() (*Comm, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	var h C.MPI_Comm
	if err := check("MPI_Comm_split_type", C.epmpi_split_shared(c.h, C.int(c.rank), &h)); err != nil {
		return nil, err
	}
	local, err := newComm(h)
	if err != nil {
		return nil, errors.Join(err, check("MPI_Comm_free", C.MPI_Comm_free(&h)))
	}
	return local, nil
}

// Free releases a communicator created by this package. World cannot be
// freed. Freeing is collective over the members of c.
func (c *Comm) Free() error {
	if err := c.ready(); err != nil {
		return err
	}
	if c.world {
		return errors.New("mpi: Free: the world communicator cannot be freed")
	}
	err := check("MPI_Comm_free", C.MPI_Comm_free(&c.h))
	c.freed = true
	return err
}

// Barrier blocks until every process of c has entered it.
func (c *Comm) Barrier() error {
	if err := c.ready(); err != nil {
		return err
	}
	return check("MPI_Barrier", C.MPI_Barrier(c.h))
}

// Bcast copies buf on rank root into buf on every other rank. All ranks must
// pass buffers of the same length.
func (c *Comm) Bcast(buf []byte, root int) error {
	if err := c.ready(); err != nil {
		return err
	}
	n, err := cCount("Bcast", "length", len(buf))
	if err != nil {
		return err
	}
	r, err := cRank("Bcast", "root", root)
	if err != nil {
		return err
	}
	return check("MPI_Bcast", C.MPI_Bcast(ptr(buf), n, C.epmpi_datatype(C.EPMPI_BYTE), r, c.h))
}

// ptr is the address of b's first element, or nil for an empty slice, for
// passing to C (MPI never dereferences the buffer of a zero count).
func ptr[T any](b []T) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

// cCount converts a non-negative element count to the C int MPI takes.
func cCount(fn, what string, n int) (C.int, error) {
	if n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("mpi: %s: %s %d is outside [0, %d]", fn, what, n, math.MaxInt32)
	}
	return C.int(n), nil
}

// cRank converts a rank or tag to a C int. Values that fit are left for MPI
// to judge, so an out-of-range rank comes back as an *Error with its class.
func cRank(fn, what string, v int) (C.int, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("mpi: %s: %s %d does not fit a C int", fn, what, v)
	}
	return C.int(v), nil
}
