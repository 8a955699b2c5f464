package validate

import (
	"fmt"

	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
)

// RoutingTopK regenerates the topk_idx of every rank for routing j from the
// seed, as the backends build it (routing.TopK with routing.GenSeed), in the
// layout of Input.TopK. It needs no communication.
func RoutingTopK(shape ll.Shape, seed uint32, j int) ([]int64, error) {
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
