package bench

import (
	"fmt"

	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/stats"
)

// statsComm lets stats.Reduce run its collectives over MPI.
type statsComm struct{ c *mpi.Comm }

// StatsComm adapts an MPI communicator to stats.Comm.
func StatsComm(c *mpi.Comm) stats.Comm { return statsComm{c} }

func (s statsComm) Rank() int { return s.c.Rank() }
func (s statsComm) Size() int { return s.c.Size() }

func (s statsComm) AllreduceFloat64(in []float64, op stats.Op) ([]float64, error) {
	var o mpi.Op
	switch op {
	case stats.Sum:
		o = mpi.Sum
	case stats.Min:
		o = mpi.Min
	case stats.Max:
		o = mpi.Max
	default:
		return nil, fmt.Errorf("reduction op %v", op)
	}
	return s.c.AllreduceFloat64(in, o)
}

func (s statsComm) AllreduceMinLoc(in []stats.ValueRank) ([]stats.ValueRank, error) {
	return s.loc(in, s.c.AllreduceMinLoc)
}

func (s statsComm) AllreduceMaxLoc(in []stats.ValueRank) ([]stats.ValueRank, error) {
	return s.loc(in, s.c.AllreduceMaxLoc)
}

func (s statsComm) loc(in []stats.ValueRank, f func([]mpi.ValueRank) ([]mpi.ValueRank, error)) ([]stats.ValueRank, error) {
	v := make([]mpi.ValueRank, len(in))
	for i, x := range in {
		v[i] = mpi.ValueRank{Value: x.Value, Rank: x.Rank}
	}
	r, err := f(v)
	if err != nil {
		return nil, err
	}
	out := make([]stats.ValueRank, len(r))
	for i, x := range r {
		out[i] = stats.ValueRank{Value: x.Value, Rank: x.Rank}
	}
	return out, nil
}
