package validate

import (
	"fmt"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
)

// Validator returns the check of this rank's outputs of a pair of routing j
// on the token rows of generation gen, for a job of shape running cfg. It
// regenerates every rank's topk_idx of routing j from cfg.Seed
// (RoutingTopK, once per routing) and this rank's weights (routing.Weights),
// so it needs no communication, and runs Check. The verdict is this rank's
// (the runner reduces it over ranks: bench.GlobalVerdicts).
func Validator(shape ll.Shape, cfg *config.Config) func(o *ll.Outputs, j, gen int) (Report, error) {
	tables := map[int][]int64{}
	var weights []float32
	return func(o *ll.Outputs, j, gen int) (Report, error) {
		if cfg == nil {
			return Report{}, fmt.Errorf("validate: no configuration")
		}
		all, ok := tables[j]
		if !ok {
			var err error
			if all, err = RoutingTopK(shape, cfg.Seed, j); err != nil {
				return Report{}, err
			}
			tables[j] = all
		}
		if weights == nil {
			var err error
			if weights, err = routing.Weights(shape.Rank, shape.Tokens, shape.TopK); err != nil {
				return Report{}, fmt.Errorf("validate: weights: %w", err)
			}
		}
		return Check(Input{Shape: shape, Dtype: cfg.DispatchDtype, Mode: cfg.CombineMode, TopK: all, Weights: weights,
			Generation: gen, SkipCombine: cfg.DispatchOnly}, o), nil
	}
}
