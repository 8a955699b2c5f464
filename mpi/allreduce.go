package mpi

// #include "epmpi.h"
import "C"

import (
	"fmt"
	"math"
)

// Op is an element-wise reduction for the Allreduce functions.
type Op int

// Reductions.
const (
	Sum = Op(C.EPMPI_OP_SUM)
	Min = Op(C.EPMPI_OP_MIN)
	Max = Op(C.EPMPI_OP_MAX)
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "Sum"
	case Min:
		return "Min"
	case Max:
		return "Max"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// AllreduceFloat64 returns the element-wise reduction by op of send over all
// ranks of c. All ranks must pass the same length.
func (c *Comm) AllreduceFloat64(send []float64, op Op) ([]float64, error) {
	return allreduce(c, send, C.EPMPI_DOUBLE, op)
}

// AllreduceInt64 is AllreduceFloat64 for int64 elements.
func (c *Comm) AllreduceInt64(send []int64, op Op) ([]int64, error) {
	return allreduce(c, send, C.EPMPI_INT64, op)
}

// AllreduceInt32 is AllreduceFloat64 for int32 elements.
func (c *Comm) AllreduceInt32(send []int32, op Op) ([]int32, error) {
	return allreduce(c, send, C.EPMPI_INT32, op)
}

func allreduce[T int32 | int64 | float64](c *Comm, send []T, dt C.int, op Op) ([]T, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	if op != Sum && op != Min && op != Max {
		return nil, fmt.Errorf("mpi: Allreduce: unsupported reduction %v", op)
	}
	n, err := cCount("Allreduce", "element count", len(send))
	if err != nil {
		return nil, err
	}
	recv := make([]T, len(send))
	rc := C.MPI_Allreduce(ptr(send), ptr(recv), n, C.epmpi_datatype(dt), C.epmpi_op(C.int(op)), c.h)
	if err := check("MPI_Allreduce", rc); err != nil {
		return nil, err
	}
	return recv, nil
}

// ValueRank is one MPI_DOUBLE_INT pair: a value and the rank it belongs to.
type ValueRank struct {
	Value float64
	Rank  int
}

// AllreduceMinLoc returns, for each element, the smallest Value over all
// ranks of c with the Rank that contributed it (MPI_MINLOC; ties go to the
// lower Rank).
func (c *Comm) AllreduceMinLoc(send []ValueRank) ([]ValueRank, error) {
	return c.allreduceLoc("AllreduceMinLoc", send, C.EPMPI_OP_MINLOC)
}

// AllreduceMaxLoc is AllreduceMinLoc for the largest Value (MPI_MAXLOC).
func (c *Comm) AllreduceMaxLoc(send []ValueRank) ([]ValueRank, error) {
	return c.allreduceLoc("AllreduceMaxLoc", send, C.EPMPI_OP_MAXLOC)
}

func (c *Comm) allreduceLoc(fn string, send []ValueRank, op C.int) ([]ValueRank, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	n, err := cCount(fn, "element count", len(send))
	if err != nil {
		return nil, err
	}
	in := make([]C.epmpi_double_int, len(send))
	for i, p := range send {
		if p.Rank < math.MinInt32 || p.Rank > math.MaxInt32 {
			return nil, fmt.Errorf("mpi: %s: element %d: rank %d does not fit a C int", fn, i, p.Rank)
		}
		in[i] = C.epmpi_double_int{value: C.double(p.Value), rank: C.int(p.Rank)}
	}
	out := make([]C.epmpi_double_int, len(send))
	rc := C.MPI_Allreduce(ptr(in), ptr(out), n, C.epmpi_datatype(C.EPMPI_DOUBLE_INT), C.epmpi_op(op), c.h)
	if err := check("MPI_Allreduce", rc); err != nil {
		return nil, err
	}
	res := make([]ValueRank, len(out))
	for i, p := range out {
		res[i] = ValueRank{Value: float64(p.value), Rank: int(p.rank)}
	}
	return res, nil
}
