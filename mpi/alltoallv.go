package mpi

// #include "epmpi.h"
import "C"

import (
	"fmt"
	"math"
)

// Alltoallv sends send[sendDispls[d] : sendDispls[d]+sendCounts[d]] to rank
// d and receives from rank s into recv[recvDispls[s] : recvDispls[s]+
// recvCounts[s]]. Counts and displacements are in bytes, one per rank of c.
// They are checked against the buffers before MPI sees them; whether the
// counts of a sender and its receiver agree can only be checked by MPI.
func (c *Comm) Alltoallv(send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int) error {
	if err := c.ready(); err != nil {
		return err
	}
	sc, sd, err := blockLayout("send", len(send), sendCounts, sendDispls, c.size)
	if err != nil {
		return err
	}
	rc, rd, err := blockLayout("recv", len(recv), recvCounts, recvDispls, c.size)
	if err != nil {
		return err
	}
	t := C.epmpi_datatype(C.EPMPI_BYTE)
	return check("MPI_Alltoallv", C.MPI_Alltoallv(ptr(send), &sc[0], &sd[0], t, ptr(recv), &rc[0], &rd[0], t, c.h))
}

// blockLayout validates one side of an Alltoallv and converts it to C ints.
func blockLayout(side string, bufLen int, counts, displs []int, size int) ([]C.int, []C.int, error) {
	if len(counts) != size {
		return nil, nil, fmt.Errorf("mpi: Alltoallv: %d %s counts for %d ranks", len(counts), side, size)
	}
	if len(displs) != size {
		return nil, nil, fmt.Errorf("mpi: Alltoallv: %d %s displacements for %d ranks", len(displs), side, size)
	}
	cc := make([]C.int, size)
	cd := make([]C.int, size)
	for r := range size {
		n, d := counts[r], displs[r]
		if n < 0 {
			return nil, nil, fmt.Errorf("mpi: Alltoallv: %s count for rank %d is negative (%d)", side, r, n)
		}
		if d < 0 {
			return nil, nil, fmt.Errorf("mpi: Alltoallv: %s displacement for rank %d is negative (%d)", side, r, d)
		}
		if n > bufLen || d > bufLen-n {
			return nil, nil, fmt.Errorf("mpi: Alltoallv: %s block for rank %d [%d, %d) exceeds the %d-byte buffer",
				side, r, d, d+n, bufLen)
		}
		if n > math.MaxInt32 || d > math.MaxInt32 {
			return nil, nil, fmt.Errorf("mpi: Alltoallv: %s block for rank %d [%d, %d) is beyond MPI's int range",
				side, r, d, d+n)
		}
		cc[r], cd[r] = C.int(n), C.int(d)
	}
	return cc, cd, nil
}
