package validate

import (
	"fmt"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/routing"
)

// Validator returns the runner's bench.Validator for this rank of a job of
// shape running cfg. It regenerates every rank's topk_idx of routing j from
// cfg.Seed (RoutingTopK, once per routing) and this rank's weights
// (routing.Weights), so it needs no communication, and runs Check. The
// verdict is this rank's; reduce it over ranks with Global.
func Validator(shape bench.Shape, cfg *config.Config) bench.Validator {
	tables := map[int][]int64{}
	var weights []float32
	return func(o *bench.Outputs, j int) (bench.Check, error) {
		if cfg == nil {
			return bench.Check{}, fmt.Errorf("validate: no configuration")
		}
		all, ok := tables[j]
		if !ok {
			var err error
			if all, err = RoutingTopK(shape, cfg.Seed, j); err != nil {
				return bench.Check{}, err
			}
			tables[j] = all
		}
		if weights == nil {
			var err error
			if weights, err = routing.Weights(shape.Rank, shape.Tokens, shape.TopK); err != nil {
				return bench.Check{}, fmt.Errorf("validate: weights: %w", err)
			}
		}
		rep := Check(Input{Shape: shape, Dtype: cfg.DispatchDtype, Mode: cfg.CombineMode, TopK: all, Weights: weights}, o)
		return bench.Check{DispatchOK: rep.DispatchOK, CombineOK: rep.CombineOK, CalcDiff: rep.CalcDiff, Detail: rep.First}, nil
	}
}
