package stats

import (
	"errors"
	"fmt"
)

// Op is an element-wise reduction over ranks.
type Op int

// Reduction operators. The zero value is not an operator, so a forgotten
// argument fails loudly instead of summing.
const (
	Sum Op = iota + 1
	Min
	Max
)

// String names the operator.
func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Min:
		return "min"
	case Max:
		return "max"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// ValueRank is MPI's DOUBLE_INT pair: a value and the rank it belongs to.
type ValueRank struct {
	Value float64
	Rank  int
}

// Comm is the slice of a communicator the reductions need. Every method is
// collective: all ranks call it in the same order with slices of equal length,
// and all receive the same result.
type Comm interface {
	// Rank is this process's rank, 0 ≤ Rank < Size.
	Rank() int
	// Size is the number of ranks.
	Size() int
	// AllreduceFloat64 reduces in element-wise over ranks.
	AllreduceFloat64(in []float64, op Op) ([]float64, error)
	// AllreduceMinLoc returns, per element, the smallest value and its rank
	// (the lower rank on ties, as MPI_MINLOC).
	AllreduceMinLoc(in []ValueRank) ([]ValueRank, error)
	// AllreduceMaxLoc returns, per element, the largest value and its rank
	// (the lower rank on ties, as MPI_MAXLOC).
	AllreduceMaxLoc(in []ValueRank) ([]ValueRank, error)
}

// ErrBadComm reports a communicator that is nil, has no ranks, or answered a
// collective with the wrong number of elements.
var ErrBadComm = errors.New("stats: bad communicator")

// ErrMismatch reports ranks that entered the same collective with different
// operations or lengths.
var ErrMismatch = errors.New("stats: ranks disagree on a collective")
