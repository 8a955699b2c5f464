package validate

import (
	"fmt"

	"github.com/epbench/epbench/ll"
)

// RoutingTopK regenerates the topk_idx of every rank for routing j from the
// seed, as the backends build it (ll.Shape.Routing), in the layout of
// Input.TopK: [Ranks, Tokens, TopK], the tokens a rank does not dispatch
// (-l, -N) all -1. It needs no communication.
func RoutingTopK(shape ll.Shape, seed uint32, j int) ([]int64, error) {
	if shape.Ranks < 1 || j < 0 {
		return nil, fmt.Errorf("validate: routing %d of %d ranks", j, shape.Ranks)
	}
	all := make([]int64, 0, shape.Ranks*shape.Tokens*shape.TopK)
	for s := 0; s < shape.Ranks; s++ {
		idx, err := shape.Routing(seed, s, j)
		if err != nil {
			return nil, fmt.Errorf("validate: topk_idx of rank %d: %w", s, err)
		}
		all = append(all, idx...)
		for range (shape.Tokens - shape.TokensOf(s)) * shape.TopK {
			all = append(all, -1)
		}
	}
	return all, nil
}
