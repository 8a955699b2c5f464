package validate

import (
	"fmt"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/routing"
)

// Gatherer is the allgather of a communicator; *mpi.Comm implements it.
type Gatherer interface {
	AllgatherInt64(send []int64) ([]int64, error)
}

// Reducer is the integer allreduce of a communicator; *mpi.Comm implements
// it.
type Reducer interface {
	AllreduceInt32(send []int32, op mpi.Op) ([]int32, error)
}

// GatherTopK collects every rank's topk_idx ([Tokens, TopK] each) into the
// [Ranks, Tokens, TopK] table Input.TopK wants. It is collective.
func GatherTopK(g Gatherer, local []int64) ([]int64, error) {
	all, err := g.AllgatherInt64(local)
	if err != nil {
		return nil, fmt.Errorf("validate: gathering topk_idx: %w", err)
	}
	return all, nil
}

// RoutingTopK regenerates the topk_idx of every rank for routing j from the
// seed, as the backends build it (routing.TopK with routing.GenSeed), in the
// layout of Input.TopK. It needs no communication.
func RoutingTopK(shape bench.Shape, seed uint32, j int) ([]int64, error) {
	if shape.Ranks < 1 || j < 0 {
		return nil, fmt.Errorf("validate: routing %d of %d ranks", j, shape.Ranks)
	}
	all := make([]int64, 0, shape.Ranks*shape.Tokens*shape.TopK)
	for s := 0; s < shape.Ranks; s++ {
		idx, err := routing.TopK(shape.Tokens, shape.Experts, shape.TopK, routing.GenSeed(seed, s, shape.Ranks, j))
		if err != nil {
			return nil, fmt.Errorf("validate: topk_idx of rank %d: %w", s, err)
		}
		all = append(all, idx...)
	}
	return all, nil
}

// Global reduces the verdicts over all ranks: a check passes globally only
// if it passed on every rank (ep_bench's MPI_Allreduce MIN). It is
// collective.
func Global(r Reducer, rep Report) (dispatchOK, combineOK bool, err error) {
	b := func(ok bool) int32 {
		if ok {
			return 1
		}
		return 0
	}
	v, err := r.AllreduceInt32([]int32{b(rep.DispatchOK), b(rep.CombineOK)}, mpi.Min)
	if err != nil {
		return false, false, fmt.Errorf("validate: reducing verdicts: %w", err)
	}
	if len(v) != 2 {
		return false, false, fmt.Errorf("validate: reducing verdicts: %d values back, want 2", len(v))
	}
	return v[0] == 1, v[1] == 1, nil
}
