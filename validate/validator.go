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
// so it needs no communication, and runs Check. active is nil, or -T's mask
// of active ranks the pair ran with (Input.Active: the combine output checked
// with the masked ranks' terms left out, the dispatch not checked). The
// verdict is this rank's (the runner reduces it over ranks:
// bench.GlobalVerdicts).
func Validator(shape ll.Shape, cfg *config.Config) func(o *ll.Outputs, j, gen int, active []bool) (Report, error) {
	return newValidator(shape, cfg).check
}

// validator caches what its checks regenerate.
type validator struct {
	shape   ll.Shape
	cfg     *config.Config
	tables  map[int][]int64
	weights []float32
}

func newValidator(shape ll.Shape, cfg *config.Config) *validator {
	return &validator{shape: shape, cfg: cfg, tables: map[int][]int64{}}
}

func (v *validator) check(o *ll.Outputs, j, gen int, active []bool) (Report, error) {
	if v.cfg == nil {
		return Report{}, fmt.Errorf("validate: no configuration")
	}
	all, ok := v.tables[j]
	if !ok {
		var err error
		if all, err = RoutingTopK(v.shape, v.cfg.Seed, j); err != nil {
			return Report{}, err
		}
		v.tables[j] = all
	}
	if v.weights == nil {
		var err error
		if v.weights, err = routing.Weights(v.shape.Rank, v.shape.Tokens, v.shape.TopK); err != nil {
			return Report{}, fmt.Errorf("validate: weights: %w", err)
		}
	}
	return Check(Input{Shape: v.shape, Dtype: v.cfg.DispatchDtype, Mode: v.cfg.CombineMode, TopK: all, Weights: v.weights,
		Generation: gen, SkipCombine: v.cfg.DispatchOnly, Active: active}, o), nil
}
