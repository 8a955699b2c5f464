package stats

import (
	"fmt"
	"strings"
)

// DType is the element format of the dispatch payload. Combine is always BF16.
type DType int

// Dispatch payload formats.
const (
	BF16 DType = iota
	FP8E4M3
)

// String returns the label ep_bench prints, e.g. "BF16" or "FP8_E4M3".
func (d DType) String() string {
	switch d {
	case BF16:
		return "BF16"
	case FP8E4M3:
		return "FP8_E4M3"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// ParseDType accepts "bf16" or "fp8_e4m3" (any case; "fp8" is short for the latter).
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "bf16":
		return BF16, nil
	case "fp8_e4m3", "fp8":
		return FP8E4M3, nil
	}
	return 0, fmt.Errorf("stats: unknown dispatch dtype %q (want bf16 or fp8_e4m3)", s)
}

// Selections counts the valid (token, expert) selections of one rank: the
// entries of topk_idx that are not masked with -1.
func Selections[T ~int32 | ~int64 | ~int](topkIdx []T) int {
	n := 0
	for _, e := range topkIdx {
		if e >= 0 {
			n++
		}
	}
	return n
}

// DispatchBytes is ep_bench's logical dispatch payload of one rank: one
// hidden-sized row per selection. FP8 rows carry one float32 scale per 128
// elements. Negative inputs count as zero.
func DispatchBytes(selections, hidden int, dt DType) int64 {
	if selections <= 0 || hidden <= 0 {
		return 0
	}
	perRow := int64(hidden) * 2
	if dt == FP8E4M3 {
		perRow = int64(hidden) + int64(hidden/128)*4
	}
	return int64(selections) * perRow
}

// CombineBytes is the combine payload of one rank: one BF16 row per selection.
func CombineBytes(selections, hidden int) int64 {
	return DispatchBytes(selections, hidden, BF16)
}

// ThroughputGBps is (bytes/1e9)/(avgUs·1e-6). It is 0 when the time is not
// positive (or NaN), so an unmeasured phase never reports infinite bandwidth.
func ThroughputGBps(bytes int64, avgUs float64) float64 {
	if !(avgUs > 0) {
		return 0
	}
	return (float64(bytes) / 1e9) / (avgUs * 1e-6)
}

// Messages counts a rank's (token, destination rank) pairs to other ranks:
// what the rank-major layout sends, a token once per rank that hosts any of
// its selections. topkIdx is [tokens, topk]; localExperts experts per rank.
func Messages(topkIdx []int64, topk, localExperts, rank int) int {
	n := 0
	for t := 0; t+topk <= len(topkIdx); t += topk {
		seen := map[int64]bool{}
		for _, e := range topkIdx[t : t+topk] {
			if e < 0 {
				continue
			}
			q := e / int64(localExperts)
			if q != int64(rank) && !seen[q] {
				seen[q] = true
				n++
			}
		}
	}
	return n
}
