package stats

import (
	"math"
	"slices"
)

// Sample holds one rank's statistics of one phase, in microseconds.
type Sample struct {
	Avg float64 `json:"avg_us"`
	Min float64 `json:"min_us"`
	Max float64 `json:"max_us"`
	P50 float64 `json:"p50_us"`
	P99 float64 `json:"p99_us"`
	// N is the number of samples the statistics cover, after trimming.
	N int `json:"samples"`
}

// Summarize computes a rank's statistics from its per-iteration times in
// microseconds. The first timed iteration is dropped when there is more than
// one, because ep_bench treats it as a warm-up outlier. An empty list gives
// the zero Sample (ep_bench prints zeros for -i 0).
func Summarize(us []float64) Sample {
	if len(us) > 1 {
		us = us[1:]
	}
	if len(us) == 0 {
		return Sample{}
	}
	sum := 0.0
	lo, hi := us[0], us[0]
	for _, v := range us {
		sum += v
		lo = math.Min(lo, v)
		hi = math.Max(hi, v)
	}
	sorted := slices.Clone(us)
	slices.Sort(sorted)
	return Sample{
		Avg: sum / float64(len(us)),
		Min: lo,
		Max: hi,
		P50: nearestRank(sorted, 50),
		P99: nearestRank(sorted, 99),
		N:   len(us),
	}
}

// nearestRank returns the p-th percentile of sorted values by the
// nearest-rank method: the smallest value with at least p% of the samples at
// or below it. No interpolation, so the result is always an observed time.
func nearestRank(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	idx := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	idx = max(0, min(idx, len(sorted)-1))
	return sorted[idx]
}
