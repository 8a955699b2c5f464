package sidebyside

import (
	"os"
	"strings"
)

// seedEnvPrefix is the prefix of the seed's Python benchmark's variables
// (MSCCLPP_EP_BENCH_TOKENS, _HIDDEN, _TOPK, _EXPERTS, _WARMUP, _ITERS),
// which name the same sizes as epbench's EPBENCH_* ones.
const seedEnvPrefix = "MSCCLPP_EP_BENCH_"

// Getenv looks up an epbench variable as os.Getenv does, and for an
// EPBENCH_* one that is unset or empty, its seed name: EPBENCH_TOKENS falls
// back to MSCCLPP_EP_BENCH_TOKENS, so the seed's launchers work unchanged.
// The EPBENCH_* name wins when both are set.
func Getenv(name string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	if rest, ok := strings.CutPrefix(name, "EPBENCH_"); ok {
		return os.Getenv(seedEnvPrefix + rest)
	}
	return ""
}
