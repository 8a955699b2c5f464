package mpi

// #include "epmpi.h"
import "C"

import (
	"fmt"
	"strings"
)

// AllgatherBytes returns the concatenation, in rank order, of send from
// every rank of c. All ranks must contribute the same number of bytes; a
// mismatch is detected (at the cost of one extra small collective) and
// reported on every rank instead of corrupting the result.
func (c *Comm) AllgatherBytes(send []byte) ([]byte, error) {
	return allgather(c, send, C.EPMPI_BYTE)
}

// AllgatherInt32 is AllgatherBytes for int32 elements.
func (c *Comm) AllgatherInt32(send []int32) ([]int32, error) {
	return allgather(c, send, C.EPMPI_INT32)
}

// AllgatherInt64 is AllgatherBytes for int64 elements.
func (c *Comm) AllgatherInt64(send []int64) ([]int64, error) {
	return allgather(c, send, C.EPMPI_INT64)
}

// AllgatherFloat64 is AllgatherBytes for float64 elements.
func (c *Comm) AllgatherFloat64(send []float64) ([]float64, error) {
	return allgather(c, send, C.EPMPI_DOUBLE)
}

// allgather gathers equal-length contributions; dt must describe T.
func allgather[T any](c *Comm, send []T, dt C.int) ([]T, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	n, err := cCount("Allgather", "element count", len(send))
	if err != nil {
		return nil, err
	}
	if err := c.sameCounts(n); err != nil {
		return nil, err
	}
	recv := make([]T, c.size*len(send))
	t := C.epmpi_datatype(dt)
	if err := check("MPI_Allgather", C.MPI_Allgather(ptr(send), n, t, ptr(recv), n, t, c.h)); err != nil {
		return nil, err
	}
	return recv, nil
}

// sameCounts fails on every rank unless all ranks pass the same n.
func (c *Comm) sameCounts(n C.int) error {
	counts := make([]C.int, c.size)
	t := C.epmpi_datatype(C.EPMPI_INT32)
	if err := check("MPI_Allgather", C.MPI_Allgather(ptr([]C.int{n}), 1, t, ptr(counts), 1, t, c.h)); err != nil {
		return err
	}
	for _, m := range counts {
		if m != n {
			var b strings.Builder
			for r, m := range counts {
				if r > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "rank %d: %d", r, int(m))
			}
			return fmt.Errorf("mpi: Allgather: ranks contribute different element counts (%s)", b.String())
		}
	}
	return nil
}
